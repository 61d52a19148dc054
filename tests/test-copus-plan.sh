#!/bin/sh
# copus-plan from the command line: predict and show on a small planner
# directory written here, the errors of an unknown model, a malformed cell
# and files that do not parse (each naming file, line and field), and, with
# the reference data ($COPUS_DATA), an end-to-end predict on Arena's models
# and cells; calibrate's constants, read back with --gpus, plan the same.
set -u
plan=${COPUS_PLAN:-sim/copus-plan}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
expect_error() { # what, expected text, command...
	what=$1 want=$2
	shift 2
	if "$@" > "$tmp/o" 2> "$tmp/e"; then
		fail "$what: succeeded"
	fi
	grep -qF -- "$want" "$tmp/e" || fail "$what: '$(cat "$tmp/e")' lacks '$want'"
}

d="$tmp/planner"
mkdir -p "$d"
cat > "$d/models.csv" <<'EOF'
family,size,dtype,num_layers,hidden_size,num_heads,seq_len,vocab_size,num_experts,expert_group_size,layer_num,width_factor,num_channels,num_classes,image_size
bert,1B,float16,16,2048,16,1024,32000,,,,,,,
moe,1B,float16,8,768,16,1024,32000,16,2048,,,,,
wide_resnet,500M,float32,,,,,,,,50,2,224,1024,224
bert,huge,float16,96,16384,128,2048,51200,,,,,,,
EOF
cat > "$d/devices.json" <<'EOF'
[
 { "gpu_type": "a40", "peak_gflops_per_second": 19200,
   "total_gpu_mem_size_mb": 45487 }
]
EOF
{
	echo 'cell,collective,groups,elements,dtype,seconds'
	for c in all-reduce all-gather reduce-scatter all-to-all send; do
		for e in 1024 1048576 67108864; do
			t=$(awk -v e=$e 'BEGIN { printf "%.6g", 2e-5 + e * 4 / 20e9 }')
			echo "2_a40_2_n_2_d,$c,\"[[0,1],[2,3]]\",$e,float32,$t"
			t=$(awk -v e=$e 'BEGIN { printf "%.6g", 5e-5 + e * 4 / 2e9 }')
			echo "2_a40_2_n_2_d,$c,\"[[0,2],[1,3]]\",$e,float32,$t"
		done
	done
} > "$d/comm.csv"

# Predictions from devices and collectives alone.
printf 'model,batch,cell\nbert_1B,128,1_a40_1_n_2_d\nmoe__1B,256,2_a40_2_n_2_d\nwide_resnet_500M,256,1_a40_1_n_1_d\nbert_huge,128,1_a40_1_n_1_d\n' \
	> "$tmp/q.csv"
"$plan" predict --data "$d" --query "$tmp/q.csv" > "$tmp/out" 2> "$tmp/err" ||
	{ cat "$tmp/err"; fail "predict failed"; }
head -1 "$tmp/out" | grep -q '^model,batch,cell,seconds,dp,tp,pp,micro_batches' ||
	fail "predict header: $(head -1 "$tmp/out")"
[ "$(wc -l < "$tmp/out")" -eq 5 ] || fail "predict: not one row a query"
# Every plan uses the cell's GPUs; the model too large for one GPU has none.
awk -F, 'NR > 1 && $1 != "bert_huge" {
	split($3, c, "_"); n = c[1] * c[5]
	if ($4 == "" || $4 <= 0 || $5 * $6 * $7 != n) { print; bad = 1 } }
	END { exit bad }' "$tmp/out" || fail "a plan does not use its cell"
grep -q '^moe_1B,256,2_a40_2_n_2_d,[0-9]' "$tmp/out" ||
	fail "the trace's model name bert__1B is not accepted"
grep -q '^bert_huge,128,1_a40_1_n_1_d,,' "$tmp/out" ||
	fail "a model that does not fit has a time"

# A calibration file that is empty of times changes nothing.
echo '{"optimal":{}}' > "$tmp/empty.json"
"$plan" predict --data "$d" --calibrate "$tmp/empty.json" --query "$tmp/q.csv" \
	> "$tmp/out2" 2> "$tmp/err" || { cat "$tmp/err"; fail "empty calibration"; }
cmp -s "$tmp/out" "$tmp/out2" || fail "{\"optimal\":{}} changed the predictions"

# Calibration on measured times: the times of one model move toward them.
cat > "$tmp/train.json" <<'EOF'
{"optimal": {"bert_1B_128": {"1_a40_1_n_2_d": 100.0, "2_a40_2_n_2_d": 55.0,
  "1_a40_1_n_1_d": 190.0}}}
EOF
"$plan" predict --data "$d" --calibrate "$tmp/train.json" --query "$tmp/q.csv" \
	> "$tmp/out3" 2> "$tmp/err" || { cat "$tmp/err"; fail "calibrated predict"; }
awk -F, '$1 == "bert_1B" { if ($4 < 80 || $4 > 125) exit 1 }' "$tmp/out3" ||
	fail "calibrated on 100 s, predicts $(grep '^bert_1B' "$tmp/out3")"

# calibrate writes the constants of every type; read back with --gpus they
# give the same plans as the calibration itself.
"$plan" calibrate --data "$d" --calibrate "$tmp/train.json" --out "$tmp/gpus.json" \
	2> "$tmp/err" || { cat "$tmp/err"; fail "calibrate failed"; }
grep -q '"a40": {' "$tmp/gpus.json" || fail "calibrate: no a40 in $(cat "$tmp/gpus.json")"
"$plan" predict --data "$d" --gpus "$tmp/gpus.json" --query "$tmp/q.csv" \
	> "$tmp/out4" 2> "$tmp/err" || { cat "$tmp/err"; fail "predict --gpus"; }
cmp -s "$tmp/out3" "$tmp/out4" ||
	fail "the calibrated constants read back plan otherwise: $(diff "$tmp/out3" "$tmp/out4")"
"$plan" calibrate --data "$d" --out - > "$tmp/gpus0.json" 2> "$tmp/err" ||
	{ cat "$tmp/err"; fail "calibrate to the standard output"; }
"$plan" predict --data "$d" --gpus "$tmp/gpus0.json" --query "$tmp/q.csv" \
	> "$tmp/out5" 2> "$tmp/err" || { cat "$tmp/err"; fail "predict --gpus (uncalibrated)"; }
cmp -s "$tmp/out" "$tmp/out5" || fail "uncalibrated constants read back plan otherwise"
# devices.json's memory bandwidth, when listed, reaches the constants (and
# the memory-bound time of the activations lengthens the plans).
grep -q '"memory_bandwidth": 0,' "$tmp/gpus0.json" ||
	fail "a device without a bandwidth: $(grep memory_bandwidth "$tmp/gpus0.json")"
cp -r "$d" "$tmp/bw"
sed -i 's/"total_gpu_mem_size_mb": 45487/&, "mem_bandwidth_gb": 696/' "$tmp/bw/devices.json"
"$plan" calibrate --data "$tmp/bw" --out "$tmp/gpus-bw.json" 2> "$tmp/err" ||
	{ cat "$tmp/err"; fail "calibrate with a bandwidth"; }
grep -q '"memory_bandwidth": 696000000000,' "$tmp/gpus-bw.json" ||
	fail "the bandwidth of devices.json: $(grep memory_bandwidth "$tmp/gpus-bw.json")"
"$plan" predict --data "$tmp/bw" --query "$tmp/q.csv" > "$tmp/out6" 2> "$tmp/err" ||
	{ cat "$tmp/err"; fail "predict with a bandwidth"; }
paste -d, "$tmp/out" "$tmp/out6" | awk -F, -v n=$(head -1 "$tmp/out" | awk -F, '{print NF}') '
	NR > 1 && $4 != "" && !($(n + 4) > $4) { print; bad = 1 } END { exit bad }' ||
	fail "a listed bandwidth did not lengthen the plans"

# The shape of a group across nodes: collectives measured with time per
# byte growing as (ranks per node)^0.5 x (nodes / 2)^1 give those
# exponents back (up to the ridge that holds unmeasured ones at 0).
cp -r "$d" "$tmp/shape"
{
	echo 'cell,collective,groups,elements,dtype,seconds'
	for c in all-reduce all-gather reduce-scatter all-to-all; do
		for e in 1024 1048576 67108864; do
			for g in '1 2 [[0,1],[2,3]]' '1 4 [[0,1,2,3]]' \
				 '2 2 [[0,1,2,3],[4,5,6,7]]' '2 4 [[0,1,2,3,4,5,6,7]]'; do
				set -- $g
				n=$(( $1 * $2 ))
				t=$(awk -v e=$e -v m=$1 -v k=$2 -v n=$n -v c=$c 'BEGIN {
					f = c == "all-reduce" ? 2 * (n - 1) / n : (n - 1) / n
					printf "%.9g", 5e-5 + f * e * 4 / 2e9 * sqrt(m) * k / 2 }')
				echo "4_a40_4_n_$1_d,$c,\"$3\",$e,float32,$t"
			done
			t=$(awk -v e=$e 'BEGIN { printf "%.9g", 2e-5 + e * 4 / 20e9 }')
			echo "1_a40_1_n_2_d,$c,\"[[0,1]]\",$e,float32,$t"
		done
	done
	for e in 1024 1048576 67108864; do
		t=$(awk -v e=$e 'BEGIN { printf "%.9g", 5e-5 + e * 4 / 2e9 }')
		echo "2_a40_2_n_1_d,send,null,$e,float32,$t"
		t=$(awk -v e=$e 'BEGIN { printf "%.9g", 2e-5 + e * 4 / 20e9 }')
		echo "1_a40_1_n_2_d,send,\"[[0,1]]\",$e,float32,$t"
	done
} > "$tmp/shape/comm.csv"
"$plan" calibrate --data "$tmp/shape" --out "$tmp/gpus-shape.json" 2> "$tmp/err" ||
	{ cat "$tmp/err"; fail "calibrate on shaped collectives"; }
grep '"shape"' "$tmp/gpus-shape.json" | tr -d '{},:"' | awk '{
	if ($5 < 0.45 || $5 > 0.5 || $9 < 0.9 || $9 > 1.0 ||
	    $7 < -0.05 || $7 > 0.05) bad = 1 } END { exit bad }' ||
	fail "the shape exponents of shaped collectives: $(grep '"shape"' "$tmp/gpus-shape.json")"

"$plan" calibrate --data "$d" > /dev/null 2>&1 && fail "calibrate without --out succeeded"

# evaluate writes each prediction of each split with --residuals: one row
# a predicted time, the quoted split name first, then the measured and
# predicted times and the plan.
cat > "$tmp/prof.json" <<'EOF'
{"optimal": {"bert_1B_128": {"1_a40_1_n_2_d": 100.0, "2_a40_2_n_2_d": 55.0,
  "1_a40_1_n_1_d": 190.0}, "moe_1B_256": {"1_a40_1_n_2_d": 20.0,
  "2_a40_2_n_2_d": 12.0}}}
EOF
"$plan" evaluate --data "$d" --prof "$tmp/prof.json" --seeds 1 \
	--residuals "$tmp/res.csv" > "$tmp/eval" 2> "$tmp/err" ||
	{ cat "$tmp/err"; fail "evaluate --residuals failed"; }
head -1 "$tmp/res.csv" | grep -q '^split,model,batch,cell,measured_s,predicted_s,dp,tp,pp,micro_batches' ||
	fail "residuals header: $(head -1 "$tmp/res.csv")"
n=$(grep -c '^"uncalibrated",' "$tmp/res.csv")
[ "$n" -eq 5 ] || fail "residuals: $n uncalibrated rows, not 5"
grep -q '^"seed 1, random half",' "$tmp/res.csv" || fail "residuals: no row of seed 1"
n=$(grep -c '^"1- and 2-GPU cells, predicting the larger",[A-Za-z_0-9.]*,[0-9]*,2_a40_2_n_2_d,' "$tmp/res.csv")
[ "$n" -eq 2 ] || fail "residuals: $n rows of the 1- and 2-GPU split, not 2"
grep -q '^"uncalibrated",bert_1B,128,1_a40_1_n_1_d,190,[0-9.e+-]*,1,1,1,' "$tmp/res.csv" ||
	fail "residuals: the 1-GPU row: $(grep 1_a40_1_n_1_d "$tmp/res.csv")"

# evaluate prints one line a split and the worst split, its median and its
# 90th percentile each with the seed that gave it.
"$plan" evaluate --data "$d" --prof "$tmp/prof.json" --seeds 1,2 \
	> "$tmp/eval2" 2> "$tmp/err" || { cat "$tmp/err"; fail "evaluate --seeds 1,2"; }
grep -q '^per split' "$tmp/eval2" || fail "evaluate: no per-split table in $(cat "$tmp/eval2")"
n=$(grep -Ec '^ +[12] +[0-9.]+% +[0-9.]+%$' "$tmp/eval2")
[ "$n" -eq 2 ] || fail "evaluate: $n lines of the table for 2 seeds"
grep -Eq '^worst split: median [0-9.]+% \(seed [12]\), p90 [0-9.]+% \(seed [12]\)$' "$tmp/eval2" ||
	fail "evaluate: no worst split in $(cat "$tmp/eval2")"

# A seed names one split: the same whichever seeds come before it.
"$plan" evaluate --data "$d" --prof "$tmp/prof.json" --seeds 1,2,3,4,5 \
	--residuals "$tmp/res-all.csv" > /dev/null 2> "$tmp/err" ||
	{ cat "$tmp/err"; fail "evaluate --seeds 1,2,3,4,5"; }
for s in 2 3 4 5; do
	"$plan" evaluate --data "$d" --prof "$tmp/prof.json" --seeds $s \
		--residuals "$tmp/res-one.csv" > /dev/null 2> "$tmp/err" ||
		{ cat "$tmp/err"; fail "evaluate --seeds $s"; }
	a=$(grep "^\"seed $s, random half\"," "$tmp/res-all.csv" | sort)
	b=$(grep "^\"seed $s, random half\"," "$tmp/res-one.csv" | sort)
	[ -n "$b" ] && [ "$a" = "$b" ] ||
		fail "seed $s predicts other cells after seeds 1-$((s - 1)) than alone: '$a' against '$b'"
done

# --exclude-cell leaves a cell out of every split, said on the output;
# without it every cell counts.
"$plan" evaluate --data "$d" --prof "$tmp/prof.json" --seeds 1 \
	--exclude-cell 2_a40_2_n_2_d --residuals "$tmp/res-x.csv" > "$tmp/eval3" 2> "$tmp/err" ||
	{ cat "$tmp/err"; fail "evaluate --exclude-cell"; }
grep -q '^excluded: 2 entries of 2_a40_2_n_2_d$' "$tmp/eval3" ||
	fail "evaluate --exclude-cell does not say so: $(cat "$tmp/eval3")"
grep -q '^3 measured times' "$tmp/eval3" || fail "evaluate --exclude-cell: $(head -1 "$tmp/eval3")"
grep -q 2_a40_2_n_2_d "$tmp/res-x.csv" && fail "an excluded cell was predicted"
# MODEL:BATCH:CELL leaves out that one time, the cell's others stay.
"$plan" evaluate --data "$d" --prof "$tmp/prof.json" --seeds 1,2,3,4,5 \
	--exclude-cell moe_1B:256:2_a40_2_n_2_d, \
	--residuals "$tmp/res-y.csv" > "$tmp/eval4" 2> "$tmp/err" ||
	{ cat "$tmp/err"; fail "evaluate --exclude-cell MODEL:BATCH:CELL"; }
grep -q '^excluded: 1 entries of moe_1B:256:2_a40_2_n_2_d,$' "$tmp/eval4" ||
	fail "evaluate --exclude-cell MODEL:BATCH:CELL: $(cat "$tmp/eval4")"
grep -q '^4 measured times' "$tmp/eval4" || fail "evaluate --exclude-cell MODEL:BATCH:CELL: $(head -1 "$tmp/eval4")"
grep -q '^"uncalibrated",moe_1B,256,2_a40_2_n_2_d,' "$tmp/res-y.csv" && fail "the excluded time was predicted"
grep -q '^"uncalibrated",bert_1B,128,2_a40_2_n_2_d,' "$tmp/res-y.csv" || fail "another model's time in the cell was left out"
# The times left are split as they are without the option: each seed's
# held-out half is the same, less the excluded time.
for s in 1 2 3 4 5; do
	a=$(grep "^\"seed $s, random half\"," "$tmp/res-all.csv" | cut -d, -f3-5 |
		grep -v '^moe_1B,256,2_a40_2_n_2_d$' | sort)
	b=$(grep "^\"seed $s, random half\"," "$tmp/res-y.csv" | cut -d, -f3-5 | sort)
	[ -n "$b" ] && [ "$a" = "$b" ] ||
		fail "seed $s holds out other times with --exclude-cell: '$a' against '$b'"
done
# An entry that names no measured time (a batch not measured, a typo that
# drops the cell) is refused, named, rather than excluding nothing.
for x in bert_1B:64:1_a40_1_n_1_d moe_1B:256 2_a40_2_n_2_d,2_a40_2_n_3_d \
	moe_1B:256x:2_a40_2_n_2_d; do
	bad=${x#2_a40_2_n_2_d,}
	expect_error "--exclude-cell $x" "--exclude-cell: '$bad' names no measured time" \
		"$plan" evaluate --data "$d" --prof "$tmp/prof.json" --seeds 1 --exclude-cell "$x"
done
grep -q '^excluded' "$tmp/eval" && fail "evaluate excludes a cell by default"
grep -q '^5 measured times' "$tmp/eval" || fail "evaluate: $(head -1 "$tmp/eval")"

# show explains one plan.
"$plan" show bert_1B 128 2_a40_2_n_2_d --data "$d" > "$tmp/show" 2>&1 ||
	{ cat "$tmp/show"; fail "show failed"; }
for w in 'stage 0: layers 0-' 'memory per GPU' 'compute' 'tensor' \
	'pipeline' 'data'; do
	grep -q "$w" "$tmp/show" || fail "show: no '$w'"
done

# Errors name the file, the line and the field.
printf 'model,batch,cell\nbert_1B,128,1_a40_1_n_2_d\ngpt_1T,128,1_a40_1_n_2_d\n' > "$tmp/q1.csv"
expect_error "unknown model" "q1.csv:3: field 'model': unknown model 'gpt_1T'" \
	"$plan" predict --data "$d" --query "$tmp/q1.csv"
printf 'model,batch,cell\nbert_1B,128,1_a40_2_n_2_d\n' > "$tmp/q2.csv"
expect_error "malformed cell" "q2.csv:2: field 'cell': cell '1_a40_2_n_2_d'" \
	"$plan" predict --data "$d" --query "$tmp/q2.csv"
printf 'model,batch,cell\nbert_1B,128,1_h100_1_n_2_d\n' > "$tmp/q3.csv"
expect_error "unknown GPU type" "q3.csv:2: field 'cell': cell '1_h100_1_n_2_d': GPU type 'h100'" \
	"$plan" predict --data "$d" --query "$tmp/q3.csv"
printf 'model,batch,cell\nbert_1B,many,1_a40_1_n_2_d\n' > "$tmp/q4.csv"
expect_error "bad batch" "q4.csv:2: field 'batch': 'many'" \
	"$plan" predict --data "$d" --query "$tmp/q4.csv"
printf '{"optimal": {\n  "bert_1B_128": {\n    "1_a40_1_n_2_d": 1.0,,\n  }\n}}\n' > "$tmp/bad.json"
expect_error "JSON that does not parse" "bad.json:3: not JSON" \
	"$plan" predict --data "$d" --calibrate "$tmp/bad.json" --query "$tmp/q.csv"
echo '{"optimal": {"gpt_1T_128": {"1_a40_1_n_2_d": 1.0}}}' > "$tmp/unk.json"
expect_error "unknown model in a calibration file" "'optimal.gpt_1T_128': model not in models.csv" \
	"$plan" predict --data "$d" --calibrate "$tmp/unk.json" --query "$tmp/q.csv"
echo '{"optimal": {"bert_1B_128": {"1_a40_1_n_2_d": "fast"}}}' > "$tmp/nan.json"
expect_error "a time that is not a number" "'optimal.bert_1B_128.1_a40_1_n_2_d' is not a number" \
	"$plan" predict --data "$d" --calibrate "$tmp/nan.json" --query "$tmp/q.csv"
cp -r "$d" "$tmp/bad1"
sed -i 's/^bert,1B,float16,16,2048/bert,1B,float16,16,wide/' "$tmp/bad1/models.csv"
expect_error "models.csv field" "models.csv:2: field 'hidden_size': 'wide'" \
	"$plan" predict --data "$tmp/bad1" --query "$tmp/q.csv"
cp -r "$d" "$tmp/bad2"
sed -i '5s/,[^,]*$/,soon/' "$tmp/bad2/comm.csv"
expect_error "comm.csv field" "comm.csv:5: field 'seconds': 'soon'" \
	"$plan" predict --data "$tmp/bad2" --query "$tmp/q.csv"
cp -r "$d" "$tmp/bad3"
sed -i 's/"total_gpu_mem_size_mb": 45487/&, "mem_bandwidth_gb": -1/' "$tmp/bad3/devices.json"
expect_error "devices.json bandwidth" "device 'a40': field 'mem_bandwidth_gb' is not a positive number" \
	"$plan" predict --data "$tmp/bad3" --query "$tmp/q.csv"
sed 's/"overhead_s": [^,]*,/"overhead_s": -1,/' "$tmp/gpus.json" > "$tmp/badg.json"
expect_error "a negative constant" "badg.json: GPU type \"a40\": \"overhead_s\": -1" \
	"$plan" predict --data "$d" --gpus "$tmp/badg.json" --query "$tmp/q.csv"
sed '3s/{/[/' "$tmp/gpus.json" > "$tmp/badg2.json"
expect_error "constants that are not JSON" "badg2.json: line 4" \
	"$plan" predict --data "$d" --gpus "$tmp/badg2.json" --query "$tmp/q.csv"
expect_error "show of an unknown model" "MODEL: unknown model 'gpt_1T'" \
	"$plan" show gpt_1T 128 1_a40_1_n_2_d --data "$d"
expect_error "show of a malformed cell" "CELL: cell '2_a40'" \
	"$plan" show bert_1B 128 2_a40 --data "$d"

# Arena's models and cells, calibrated on part of the measured times.
data=${COPUS_DATA:-}/arena
if [ -z "${COPUS_DATA:-}" ] || [ ! -f "$data/planner/models.csv" ]; then
	echo "SKIP: the Arena data are not under \$COPUS_DATA"
	exit 0
fi
printf 'model,batch,cell\nbert__2.6B,256,2_a40_2_n_2_d\nmoe_10B,512,2_a100_2_n_4_d\nwide_resnet_2B,256,1_v100_1_n_8_d\nbert_39B,128,1_a10_1_n_1_d\n' \
	> "$tmp/qa.csv"
# One calibration on Arena's times (it is the costly step; that the written
# constants plan as the calibration itself does is shown above, on $d).
"$plan" calibrate --data "$data/planner" --calibrate "$data/database/prof_database.json" \
	--out "$tmp/arena-gpus.json" 2> "$tmp/err" || { cat "$tmp/err"; fail "Arena: calibrate"; }
"$plan" predict --data "$data/planner" --gpus "$tmp/arena-gpus.json" \
	--query "$tmp/qa.csv" > "$tmp/oa" 2> "$tmp/err" ||
	{ cat "$tmp/err"; fail "predict on Arena's data"; }
awk -F, 'NR > 1 && $1 != "bert_39B" {
	split($3, c, "_"); n = c[1] * c[5]
	if ($4 == "" || $4 <= 0 || $4 > 300 || $5 * $6 * $7 != n) { print; bad = 1 } }
	END { exit bad }' "$tmp/oa" || fail "Arena: a plan without a time or off its cell"
grep -q '^bert_39B,128,1_a10_1_n_1_d,,' "$tmp/oa" ||
	fail "Arena: a 39B model has a plan on one A10"
exit 0
