#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# tests/vm-4cpus.sh BUILD_DIR: what runs again in a guest of 4 vCPUs (tests/suite.sh):
# the deque races (one owner, three thieves), the MPMC queue's race (four threads pushing
# and popping), the MPSC queue's (three producers, one consumer) and the sched_ext
# scheduler. Not the spin lock's: spinning on a lock whose holder's vCPU the host
# descheduled (4 vCPUs on 2 host CPUs) only measures the host.
build=${1:?usage: vm-4cpus.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
rc=0

echo "== deque races, $(nproc) CPUs"
"$build/runner" "$build/tests/test_spmc_race.bpf.o" || rc=1
echo "== MPMC queue race, $(nproc) CPUs"
"$build/runner" -f parallel_test_mpmcq_race "$build/tests/test_mpmcq.bpf.o" || rc=1
echo "== MPSC queue race, $(nproc) CPUs"
"$build/runner" -f parallel_test_mpsc_race "$build/tests/test_mpsc.bpf.o" || rc=1
"$here/scheduler-test.sh" "$build" || rc=1
exit $rc
