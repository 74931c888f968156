"""The replayed week's busy cluster can be driven by a workload trace in the Standard Workload
Format: what each quarter hour lists, and which quarter hours are busy."""

import pytest

from benchmarks.week import SWEEP, swf_trace

H = 3600
TRACE = """; Version: 2.2
; UnixStartTime: 1000000000
1 1000 900 3600 8 -1 -1 8 3600 -1 1 3 1 -1 1 1 -1 -1
2 1005 -1 -1 -1 -1 -1 8 3600 -1 5 3 1 -1 1 1 -1 -1  ; cancelled before it started
3 19000 0 1800 8 -1 -1 8 1800 -1 1 4 1 -1 1 1 -1 -1
"""


def test_each_quarter_hour_lists_what_waits_and_what_runs() -> None:
    phases, busy = swf_trace(TRACE)
    # job 1 waits 15 min from the trace's start, then runs an hour; job 3 starts 5 h later
    assert [j["job_state"] for j in phases[0.0]["jobs"]] == ["PENDING"]
    assert [j["job_state"] for j in phases[0.25]["jobs"]] == ["RUNNING"]
    assert phases[1.25]["jobs"] == []
    assert [j["job_state"] for j in phases[5.0]["jobs"]] == ["RUNNING"]
    assert phases[5.5]["jobs"] == []
    assert busy == [(h / 4, h / 4 + SWEEP / H) for h in (0, 1, 2, 3, 4, 20, 21)]


def test_a_trace_with_no_usable_job_is_refused() -> None:
    with pytest.raises(ValueError, match="no job"):
        swf_trace("; only a header\n1 5 -1 -1 -1\n")
