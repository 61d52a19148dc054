"""The PyTorch examples of etc/pytorch work as written (copus-pytorch(7)),
and so does copus_launch, which starts them:

- train_plain.py, train_dp.py, train_tp.py and train_pp.py, each started
  on 2 processes by `python3 -m copus_launch --nproc 2`, train a few steps
  and the launcher exits 0;
- train_dp.py, given SIGUSR1 through the launcher (which forwards it to
  the ranks), checkpoints and the launcher exits 75; run again as restart
  1, rank 0 logs "resuming from checkpoint DIR at step N", N being the
  last step the first run logged, and it trains on from step N + 1;
- init_distributed on 2 Slurm-like tasks (SLURM_PROCID, SLURM_NTASKS,
  SLURM_LOCALID, SLURM_JOB_NODELIST=localhost) without scontrol meets at
  20000 + SLURM_JOB_ID % 20000; a missing variable is named; a host
  list's first host is read without scontrol;
- train.sbatch, run by bash as Slurm runs a batch script (with stand-ins
  for srun and scontrol that start its tasks as srun does), trains
  train_dp.py on 2 tasks and exits 0.

Run by tests/test-pytorch.sh: test_pytorch_examples.py run
"""

import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
ADAPTER = os.path.join(HERE, "..", "contrib", "pytorch")
EXAMPLES = os.path.join(HERE, "..", "etc", "pytorch")
sys.path.insert(0, ADAPTER)

import copus_launch  # noqa: E402

failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        failures.append(what)


def environment(**extra):
    """This process's environment without a job's variables, with the
    adapter on Python's path."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SLURM_") and k not in (
               "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
               "MASTER_PORT", "COPUS_CKPT_DIR")}
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.abspath(ADAPTER)] +
        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.update(extra)
    return env


def launcher(script, *args):
    return [sys.executable, "-m", "copus_launch", "--nproc", "2",
            os.path.join(EXAMPLES, script)] + list(args)


def run(cmd, cwd, env, timeout=120):
    """The command's exit code and output (stdout and stderr)."""
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout)
        return p.returncode, p.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired as e:
        return None, (e.stdout or b"").decode(errors="replace")


def steps(out):
    """The steps that rank 0 logged."""
    return [int(m) for m in re.findall(r"^step (\d+) ", out, re.M)]


def tail(out, n=8):
    return " | ".join(out.strip().splitlines()[-n:])


def slurm_port():
    """A free port of the range Slurm jobs' ports are taken from, and a
    job id that picks it."""
    base = copus_launch.SLURM_PORT_BASE
    for _ in range(200):
        port = random.randrange(base, base + copus_launch.SLURM_PORT_RANGE)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            s.close()
        return port, port
    raise RuntimeError("no free port in [%d, %d)" % (
        base, base + copus_launch.SLURM_PORT_RANGE))


def examples_train(tmp):
    for script, extra in (("train_plain.py", []), ("train_dp.py", []),
                          ("train_tp.py", []), ("train_pp.py", ["--bf16"])):
        ckpt = os.path.join(tmp, "ckpt-" + script)
        args = ["--steps", "3", "--log-every", "1"] + extra
        if script != "train_plain.py":
            args += ["--ckpt-dir", ckpt]
        code, out = run(launcher(script, *args), tmp, environment())
        check(code == 0 and steps(out) == [1, 2, 3],
              "%s on 2 processes (copus_launch) trains steps 1-3 and exits "
              "0 (exit %s, steps %s: %s)" % (script, code, steps(out),
                                             tail(out, 3)))


def examples_rescale(tmp):
    """train_dp.py stopped by SIGUSR1 through the launcher, then resumed
    as restart 1."""
    ckpt = os.path.join(tmp, "ckpt-rescale")
    p = subprocess.Popen(launcher("train_dp.py", "--steps", "200",
                                  "--log-every", "1", "--ckpt-dir", ckpt),
                         cwd=tmp, env=environment(SLURM_RESTART_COUNT="0"),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    timer = threading.Timer(120, p.kill)
    timer.start()
    lines, sent = [], False
    for raw in p.stdout:
        line = raw.decode(errors="replace")
        lines.append(line)
        if not sent and line.startswith("step 3 "):
            p.send_signal(signal.SIGUSR1)
            sent = True
    code = p.wait()
    timer.cancel()
    out = "".join(lines)
    done = steps(out)
    check(sent and code == 75,
          "train_dp.py given SIGUSR1 through the launcher at step 3: the "
          "launcher exits 75 (exit %s: %s)" % (code, tail(out)))
    if not done:
        return
    code, out = run(launcher("train_dp.py", "--steps", str(done[-1] + 3),
                             "--log-every", "1", "--ckpt-dir", ckpt),
                    tmp, environment(SLURM_RESTART_COUNT="1"))
    m = re.search(r"resuming from checkpoint (\S+) at step (\d+)", out)
    at = int(m.group(2)) if m else None
    check(m is not None and os.path.samefile(m.group(1), ckpt) and
          at == done[-1] and at >= 3,
          "the resumed run logs \"resuming from checkpoint %s at step %d\" "
          "(the first run's last step): %s"
          % (ckpt, done[-1], m.group(0) if m else tail(out)))
    again = steps(out)
    check(code == 0 and at is not None and
          again == list(range(at + 1, done[-1] + 4)),
          "the resumed run trains steps %s-%d and exits 0 (exit %s, "
          "steps %s)" % (at and at + 1, done[-1] + 3, code, again))


WORKER = r"""
import json, os, sys
import torch, torch.distributed as dist
import copus_launch
r, w, l = copus_launch.init_distributed(timeout=60)
t = torch.tensor([float(r + 1)])
dist.all_reduce(t)
print(json.dumps({"rank": r, "world": w, "local": l, "sum": float(t),
                  "addr": os.environ["MASTER_ADDR"],
                  "port": int(os.environ["MASTER_PORT"]),
                  "again": list(copus_launch.init_distributed())}))
"""


def slurm_init(tmp):
    """init_distributed from Slurm's variables, no scontrol on PATH."""
    bare = os.path.join(tmp, "bare-bin")
    os.makedirs(bare)
    os.symlink(sys.executable, os.path.join(bare, "python3"))
    port, job = slurm_port()
    procs = []
    for r in range(2):
        env = environment(PATH=bare, SLURM_PROCID=str(r), SLURM_NTASKS="2",
                          SLURM_LOCALID=str(r), SLURM_JOB_ID=str(job),
                          SLURM_JOB_NODELIST="localhost")
        procs.append(subprocess.Popen(
            ["python3", "-c", WORKER], cwd=tmp, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=90)[0].decode())
        except subprocess.TimeoutExpired:
            p.kill()
            outs.append(p.communicate()[0].decode() + " (timed out)")
    got = []
    for o in outs:
        try:
            got.append(json.loads(o.strip().splitlines()[-1]))
        except (ValueError, IndexError):
            got.append(None)
    check(None not in got and
          [(g["rank"], g["world"], g["local"], g["sum"]) for g in got] ==
          [(0, 2, 0, 3.0), (1, 2, 1, 3.0)] and
          all(g["addr"] == "localhost" and g["port"] == port and
              g["again"] == [g["rank"], 2, g["local"]] for g in got),
          "init_distributed on 2 Slurm tasks without scontrol: ranks 0 and 1 "
          "of 2 meet at localhost:%d (20000 + job %d %% 20000) and "
          "all-reduce (%s)" % (port, job, got if None not in got else
                               [tail(o, 3) for o in outs]))

    def error(env):
        try:
            copus_launch.layout_from_env(env)
        except copus_launch.LaunchError as e:
            return str(e)
        return None
    e = error({"SLURM_PROCID": "1", "SLURM_LOCALID": "1",
               "SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "n1"})
    check(e is not None and "SLURM_NTASKS" in e,
          "a Slurm task without SLURM_NTASKS: the error names it (%s)" % e)
    e = error({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "1"})
    check(e is not None and "MASTER_ADDR" in e,
          "torchrun's variables without MASTER_ADDR: the error names it "
          "(%s)" % e)
    lay = copus_launch.layout_from_env({
        "SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1",
        "SLURM_JOB_ID": "123456", "SLURM_JOB_NODELIST": "n[1-2]",
        "SLURM_STEP_NODELIST": "n[2]", "MASTER_PORT": "29500"})
    check(lay["master_port"] == 29500,
          "MASTER_PORT overrides the port of the job id (%s)" % lay)
    hosts = {h: copus_launch._first_of_hostlist(h) for h in
             ("gpu[03-05,9],cpu1", "rack[2-3]-n[007-9]", "localhost",
              "a,b[1-2]")}
    check(list(hosts.values()) == ["gpu03", "rack2-n007", "localhost", "a"],
          "the first host of Slurm host lists, without scontrol: %s" % hosts)


FAKE_SRUN = r"""#!%(python)s
# srun's stand-in: the tasks of one node, with Slurm's task variables;
# signals forwarded; the highest exit code.
import os, signal, subprocess, sys
args, per_node, ntasks = sys.argv[1:], None, None
while args and args[0].startswith("--"):
    k, _, v = args.pop(0).partition("=")
    if k == "--ntasks-per-node":
        per_node = int(v)
    elif k == "--ntasks":
        ntasks = int(v)
n = ntasks or per_node or 1
print("srun: %%d tasks of %%s" %% (n, " ".join(args)), file=sys.stderr,
      flush=True)
procs = [subprocess.Popen(args, env=dict(
    os.environ, SLURM_PROCID=str(r), SLURM_LOCALID=str(r), SLURM_NTASKS=str(n),
    SLURM_STEP_ID="0", SLURM_STEP_NODELIST=os.environ["SLURM_JOB_NODELIST"]))
    for r in range(n)]
def forward(s, f):
    for p in procs:
        if p.returncode is None:
            os.kill(p.pid, s)
for s in (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT):
    signal.signal(s, forward)
codes = [p.wait() for p in procs]
sys.exit(max(c if c >= 0 else 128 - c for c in codes))
"""

FAKE_SCONTROL = r"""#!/bin/sh
# scontrol's stand-in: a node's GPUs, a host list's hosts; the rest (the
# hints libcopus publishes) accepted.
case "$*" in
"show hostnames "*) echo "$3" | tr ',' '\n' ;;
"-o show node "*) echo "NodeName=$4 Gres=gpu:a100:2 State=ALLOCATED" ;;
esac
exit 0
"""


def sbatch_script(tmp):
    """train.sbatch run by bash, as slurmd runs a batch script."""
    job = os.path.join(tmp, "job")
    os.makedirs(job)
    for f in ("train.sbatch", "train_dp.py", "lm.py"):
        shutil.copy(os.path.join(EXAMPLES, f), job)
    fake = os.path.join(tmp, "fake-bin")
    os.makedirs(fake)
    for name, text in (("srun", FAKE_SRUN % {"python": sys.executable}),
                       ("scontrol", FAKE_SCONTROL)):
        with open(os.path.join(fake, name), "w") as f:
            f.write(text)
        os.chmod(os.path.join(fake, name), 0o755)
    os.symlink(sys.executable, os.path.join(fake, "python3"))
    port, jobid = slurm_port()
    env = environment(PATH=fake + os.pathsep + os.environ.get("PATH", ""),
                      SLURM_SUBMIT_DIR=job, SLURM_JOB_ID=str(jobid),
                      SLURM_JOB_NUM_NODES="1", SLURM_GPUS_ON_NODE="2",
                      SLURM_JOB_NODELIST="localhost",
                      SLURMD_NODENAME="localhost", SLURM_RESTART_COUNT="0",
                      SLURM_PROCID="0", SLURM_LOCALID="0",
                      SLURM_NTASKS="1")
    code, out = run(["bash", os.path.join(job, "train.sbatch"), "--steps",
                     "3", "--log-every", "1"], tmp, env)
    check(code == 0 and "srun: 2 tasks of python3 train_dp.py" in out and
          steps(out) == [1, 2, 3] and
          os.path.isdir(os.path.join(job, "ckpt-%d" % jobid)),
          "train.sbatch as a batch script of 2 GPUs: 2 tasks of train_dp.py "
          "(Slurm's variables, port of job %d) train steps 1-3, exit 0, "
          "checkpoints in ckpt-%d (exit %s: %s)"
          % (jobid, jobid, code, tail(out)))


def main():
    tmp = tempfile.mkdtemp(prefix="copus-examples.")
    try:
        examples_train(tmp)
        examples_rescale(tmp)
        slurm_init(tmp)
        sbatch_script(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "run":
        sys.exit(main())
    print("usage: test_pytorch_examples.py run", file=sys.stderr)
    sys.exit(2)
