#!/usr/bin/env bash
# A one-node SLURM cluster with accounting on this machine, for the tests marked `slurm`.
# Run by hand (docs/cluster.md, "Test cluster") and by .ci/run, the CI entry point (.ci/ holds only that).
#
#   bash ci/slurm-up.sh          # install (Debian/Ubuntu), configure, start; idempotent
#   bash ci/slurm-up.sh --down   # stop the daemons this script started
#
# Installs Debian's slurm-wlm, slurmdbd, munge and mariadb-server, writes /etc/slurm/slurm.conf
# (the in-job `srun` that snakemake-executor-plugin-slurm runs drops SLURM_CONF, so the config
# must sit at the default path), starts MariaDB on 127.0.0.1, slurmdbd, munged, slurmctld and
# slurmd by hand (no systemd needed), creates an account for the user who runs the tests and
# waits until `sinfo` shows the node idle. The node advertises one fake GPU (gres `gpu`,
# File=/dev/null) so that jobs requesting `gpu=1` are scheduled and enforced as GPU jobs.
# Root is needed (the script re-runs itself with sudo); the test user is $SLURM_TEST_USER,
# else $SUDO_USER, else the current user. A running cluster with the same slurm.conf is kept.
set -euo pipefail

TEST_USER="${SLURM_TEST_USER:-${SUDO_USER:-$(id -un)}}"
if [ "$(id -u)" -ne 0 ]; then
    exec sudo SLURM_TEST_USER="$TEST_USER" bash "$0" "$@"
fi
ACCOUNT="attnrepro"
CLUSTER="attnrepro"
NODE="$(hostname -s)"
DB_PASS="attnrepro-slurmdbd"   # a throwaway local database bound to 127.0.0.1
SLURM_USER="root"
CPUS="$(nproc)"
# At least 16 GB advertised (SlurmdParameters=config_overrides), so the profile's default
# mem_mb fits on a small CI machine; nothing enforces memory here (no cgroups).
MEM_MB="$(awk '/^MemTotal:/ {m = int($2 / 1024 * 0.9); print (m > 16000 ? m : 16000)}' /proc/meminfo)"

log() { echo "slurm-up: $*" >&2; }

SLURM_CONF="# Written by attnrepro ci/slurm-up.sh: one node, one fake GPU, accounting through slurmdbd.
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=$SLURM_USER
AuthType=auth/munge
# credential lifetime, which is also how long a requeued job waits to start again (default 120 s)
AuthInfo=cred_expire=10
CredType=cred/munge
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# no cgroups in a container: track processes by parent pid, no task binding
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=5,bf_interval=5
SlurmdParameters=config_overrides
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStorageEnforce=associations
AccountingStorageTRES=gres/gpu
JobRequeue=1
ReturnToService=2
# finished jobs stay visible to squeue/scontrol for an hour: >= 3 x the plugin's status-check
# interval, as profiles/slurm's squeue status checks need (and the tests read them)
MinJobAge=3600
KillWait=30
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB Gres=gpu:1 State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP"

GRES_CONF="# A fake GPU: scheduled and counted like a real one, backed by no device.
AutoDetect=off
Name=gpu File=/dev/null"

SLURMDBD_CONF="AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
SlurmUser=$SLURM_USER
PidFile=/run/slurmdbd.pid
LogFile=/var/log/slurm/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=3306
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db"

stop_daemons() {
    for pidfile in /run/slurmd.pid /run/slurmctld.pid /run/slurmdbd.pid /run/munge/munged.pid /run/mysqld/mysqld.pid; do
        if [ -s "$pidfile" ]; then
            pid="$(cat "$pidfile")"
            log "stopping $(basename "$pidfile" .pid) (pid $pid)"
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
            rm -f "$pidfile"
        fi
    done
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
    local seconds="$1" what="$2"
    shift 2
    for _ in $(seq $((seconds * 5))); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.2
    done
    log "timed out after ${seconds}s waiting for $what"
    for f in /var/log/slurm/*.log; do [ -f "$f" ] && { log "--- $f"; tail -n 20 "$f" >&2; }; done
    return 1
}

node_idle() { [ "$(sinfo -h -n "$NODE" -o %T 2>/dev/null | tr -d '*~#')" = "idle" ]; }

if [ "${1:-}" = "--down" ]; then
    stop_daemons
    exit 0
fi

if command -v sinfo >/dev/null && [ "$(cat /etc/slurm/slurm.conf 2>/dev/null)" = "$SLURM_CONF" ] && node_idle \
    && sacctmgr -n -P show user "$TEST_USER" 2>/dev/null | grep -q .; then
    log "cluster already up: $(sinfo -h -o '%P %D %T %G')"
    exit 0
fi

start=$(date +%s)
if ! command -v slurmctld >/dev/null || ! command -v slurmdbd >/dev/null || ! command -v munged >/dev/null \
    || ! command -v mariadbd >/dev/null; then
    log "installing slurm-wlm, slurmdbd, munge, mariadb-server (apt-get)"
    apt-get update -qq
    env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        slurm-wlm slurmdbd munge mariadb-server >/dev/null
fi
stop_daemons   # a half-started cluster, or one with an older configuration

mkdir -p /etc/slurm /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /var/log/slurm /run/munge /run/mysqld
chown munge:munge /run/munge   # munged refuses to start otherwise
chmod 0755 /run/munge
chown mysql:mysql /run/mysqld
printf '%s\n' "$SLURM_CONF" >/etc/slurm/slurm.conf
printf '%s\n' "$GRES_CONF" >/etc/slurm/gres.conf
printf '%s\n' "$SLURMDBD_CONF" >/etc/slurm/slurmdbd.conf
chown "$SLURM_USER" /etc/slurm/slurmdbd.conf
chmod 0600 /etc/slurm/slurmdbd.conf

# --- MariaDB on 127.0.0.1 ----------------------------------------------------------------------
if [ ! -d /var/lib/mysql/mysql ]; then
    mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
fi
setsid runuser -u mysql -- mariadbd --datadir=/var/lib/mysql --bind-address=127.0.0.1 --port=3306 \
    --socket=/run/mysqld/mysqld.sock --pid-file=/run/mysqld/mysqld.pid </dev/null >/var/log/slurm/mariadb.log 2>&1 &
wait_for 60 "MariaDB" mariadb --socket=/run/mysqld/mysqld.sock -e "select 1"
mariadb --socket=/run/mysqld/mysqld.sock <<SQL
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
FLUSH PRIVILEGES;
SQL

# --- munge, slurmdbd, slurmctld, slurmd ---------------------------------------------------------
runuser -u munge -- munged
wait_for 20 "munged" munge -n
slurmdbd
wait_for 60 "slurmdbd" sacctmgr -n show cluster
sacctmgr -i add cluster "$CLUSTER" >/dev/null || true
slurmctld
wait_for 60 "slurmctld" scontrol ping
slurmd
sacctmgr -i add account "$ACCOUNT" Cluster="$CLUSTER" Description="attnrepro tests" Organization=attnrepro \
    >/dev/null || true
for user in "$TEST_USER" root; do
    sacctmgr -i add user "$user" Account="$ACCOUNT" DefaultAccount="$ACCOUNT" Cluster="$CLUSTER" >/dev/null || true
done
if ! wait_for 60 "node $NODE to be idle" node_idle; then
    scontrol update NodeName="$NODE" State=RESUME || true
    wait_for 30 "node $NODE to be idle" node_idle
fi
wait_for 30 "the association of $TEST_USER" sh -c "sacctmgr -n -P show assoc user='$TEST_USER' | grep -q '$ACCOUNT'"
log "up in $(($(date +%s) - start)) s: $(sinfo -V), $(sinfo -h -o '%P %D %T gres=%G'), account $ACCOUNT for $TEST_USER"
