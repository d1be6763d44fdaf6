"""Which writer leases ``protolake maintain`` takes: those of the jobs writing the table group
it rewrites, so maintaining silver's tables is not refused while bronze runs."""

from pipelines.ops.maintain import _writers_of


def test_each_group_takes_the_lease_of_the_job_writing_it():
    assert _writers_of("bronze") == ("bronze",)
    assert _writers_of("silver") == ("silver",)
    assert _writers_of("quarantine") == ("silver",)
    assert _writers_of("quality") == ("silver",)


def test_all_groups_take_both_leases():
    assert _writers_of("all") == ("bronze", "silver")
