#!/usr/bin/env bash
# Makes a password for every Redis user, and the ACL files of the in-cluster Redis pods, as files:
#   deploy/k8s/acl/make-secrets.sh DIR [LOCK_NODES]     (LOCK_NODES: default 5)
# DIR/<role>-lock-<i>-password (scheduler, worker, control), DIR/<role>-queue-password (scheduler,
# worker, control, status), DIR/probe-password: 64 hex characters (URL-safe), no newline.
# DIR/tickwarden-lock-<i>.acl and DIR/queue-redis.acl: render.sh's output for those passwords.
# The README's "Apply" turns DIR into the Secrets tickwarden-redis and tickwarden-redis-acl.
set -euo pipefail
dir="${1:?usage: make-secrets.sh DIR [LOCK_NODES]}"
nodes="${2:-5}"
here="$(cd "$(dirname "$0")" && pwd)"
umask 077
mkdir -p "$dir"
new_password() { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$dir/$1"; }
read_password() { cat "$dir/$1"; }

new_password probe-password
export TICKWARDEN_ACL_PROBE
TICKWARDEN_ACL_PROBE="$(read_password probe-password)"
for ((i = 0; i < nodes; i++)); do
  for role in scheduler worker control; do new_password "$role-lock-$i-password"; done
  TICKWARDEN_ACL_SCHEDULER="$(read_password "scheduler-lock-$i-password")" \
    TICKWARDEN_ACL_WORKER="$(read_password "worker-lock-$i-password")" \
    TICKWARDEN_ACL_CONTROL="$(read_password "control-lock-$i-password")" \
    "$here/render.sh" lock-node > "$dir/tickwarden-lock-$i.acl"
done
for role in scheduler worker control status; do new_password "$role-queue-password"; done
TICKWARDEN_ACL_SCHEDULER="$(read_password scheduler-queue-password)" \
  TICKWARDEN_ACL_WORKER="$(read_password worker-queue-password)" \
  TICKWARDEN_ACL_CONTROL="$(read_password control-queue-password)" \
  TICKWARDEN_ACL_STATUS="$(read_password status-queue-password)" \
  "$here/render.sh" queue-redis > "$dir/queue-redis.acl"
