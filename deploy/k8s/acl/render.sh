#!/usr/bin/env bash
# Renders a Redis ACL file from one of the templates beside this script.
#   TICKWARDEN_ACL_SCHEDULER=... TICKWARDEN_ACL_WORKER=... deploy/k8s/acl/render.sh lock-node > lock-0.acl
# Each #{{role}} of the template takes the SHA-256 of the password in TICKWARDEN_ACL_<ROLE>
# (environment, so no password is ever in an argv); a role without one is an error.
set -euo pipefail
template="$(dirname "$0")/${1:?usage: render.sh lock-node|queue-redis}.acl"
[ -f "$template" ] || { echo "render.sh: no template $template (lock-node or queue-redis)" >&2; exit 2; }
# Redis refuses comments in an ACL file: only the `user` lines are rendered.
text="$(grep '^user ' "$template")"
for role in $(grep '^user ' "$template" | grep -o '#{{[a-z]*}}' | sort -u | tr -d '#{}'); do
  var="TICKWARDEN_ACL_$(echo "$role" | tr '[:lower:]' '[:upper:]')"
  password="${!var:-}"
  [ -n "$password" ] || { echo "render.sh: $var is not set (the $role user's password)" >&2; exit 2; }
  hash="$(printf '%s' "$password" | sha256sum | cut -d' ' -f1)"
  text="${text//\#\{\{$role\}\}/#$hash}"
done
printf '%s\n' "$text"
