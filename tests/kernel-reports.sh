#!/usr/bin/env bash
# Host test of kernel_reports (qemu/lib.sh): the kernel log check leaves
# out nvmet's known lockdep report, whole, and nothing else. Fixtures are
# shaped as the lockdep reports of a 6.12 guest (measurements.rst, session
# 24), cut down.
set -u
. "$(dirname "$0")/../qemu/lib.sh"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fails=0
# report LOCK_A LOCK_B: a lockdep circular-dependency report naming them.
report() {
	cat <<R
[  119.243507] WARNING: possible circular locking dependency detected
[  119.243772] 6.12.117 #1 Tainted: G           O
[  119.244035] ffff (&id_priv->$2){+.+.}-{3:3}, at: rdma_destroy_id+0x16/0x20
[  119.244782] ffff ($1){++++}-{3:3}, at: nvmet_port_subsys_drop_link+0x1e/0xe0 [nvmet]
[  119.248120] Call Trace:
[  119.248130]  <TASK>
[  119.248140]  dump_stack_lvl+0x5d/0x80
[  119.248150]  </TASK>
R
}
# expect NAME WANT: kernel_reports of $d/NAME prints WANT lines.
expect() {
	local got
	got=$(kernel_reports "$d/$1" | wc -l)
	if [ "$got" -eq "$2" ]; then
		echo "ok - $1: $2 report lines"
	else
		echo "not ok - $1: $got report lines, not $2"
		fails=$((fails + 1))
	fi
}
{ echo "[    1.0] boot"; report nvmet_config_sem handler_mutex; echo "[  120.0] after"; } >"$d/known"
expect known 0
{ report some_sem handler_mutex; } >"$d/other-lock"
expect other-lock 2
{ report nvmet_config_sem handler_mutex; echo "[  130.0] WARNING: CPU: 0 PID: 1 at rxud"; } >"$d/known-then-warning"
expect known-then-warning 1
{ report nvmet_config_sem handler_mutex | sed '/<\/TASK>/d'; echo "[  130.0] BUG: unable to handle page fault"; } >"$d/unterminated"
# A report cut short (no "</TASK>") ends where the next report starts.
expect unterminated 1
exit $((fails > 0))
