#!/usr/bin/env bash
# A single-node Slurm cluster in one folder, for the scale-out test
# (tests/sharding/scale_out.rs) and by hand.
#
#   .ci/slurm-cluster.sh start DIR   # writes DIR/slurm.conf, starts munged, slurmctld, slurmd
#   SLURM_CONF=DIR/slurm.conf srun -n 2 hostname
#   .ci/slurm-cluster.sh stop DIR    # stops the three daemons started in DIR
#
# Everything (keys, sockets, state, logs, pid files) lives in DIR, so it needs no system
# configuration and leaves none behind; the daemons listen on free loopback ports picked at
# start. Needs root (the daemons run as root) and Debian's slurm-wlm and munge packages;
# `.ci/run` installs them.
set -euo pipefail

cmd="${1:-}"
dir="${2:-}"
if [[ -z "$cmd" || -z "$dir" ]]; then
  echo "usage: $0 start|stop DIR" >&2
  exit 2
fi

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

stop() {
  for name in slurmd slurmctld munged; do
    local pidfile="$dir/$name.pid"
    if [[ -f "$pidfile" ]]; then
      local pid
      pid="$(cat "$pidfile")"
      kill "$pid" 2>/dev/null || true
      # Bounded wait for the daemon to exit, then SIGKILL.
      for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$pidfile"
    fi
  done
}

wait_for() { # wait_for SECONDS COMMAND...: polls the command until it succeeds
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      return 1
    fi
    sleep 0.2
  done
}

start() {
  for bin in munged slurmctld slurmd srun sinfo; do
    command -v "$bin" >/dev/null || { echo "$bin not found: apt-get install slurm-wlm munge" >&2; exit 3; }
  done
  mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
  dir="$(cd "$dir" && pwd)"
  chmod 700 "$dir/munge"
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/seed"
  wait_for 10 test -S "$dir/munge/munge.sock"

  local node cpus ctld_port slurmd_port
  node="$(hostname -s)"
  cpus="$(nproc)"
  ctld_port="$(free_port)"
  slurmd_port="$(free_port)"
  cat >"$dir/slurm.conf" <<CONF
ClusterName=loadgen
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -f "$SLURM_CONF"
  slurmd -f "$SLURM_CONF" -N "$node"
  if ! wait_for 30 bash -c "sinfo -h -o %T | grep -qE '^(idle|mixed|allocated)'"; then
    echo "the single-node cluster did not come up; logs in $dir" >&2
    tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
    stop
    exit 1
  fi
  echo "SLURM_CONF=$SLURM_CONF"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
