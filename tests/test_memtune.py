"""memtune.frozen_gc: objects that exist on entry are out of the collector's reach for the
duration, and back afterwards unless something had frozen objects before."""

import gc

from nrtrewrite.memtune import frozen_gc


def test_frozen_for_the_duration_then_unfrozen():
    assert gc.get_freeze_count() == 0
    keep = [object() for _ in range(1000)]
    with frozen_gc():
        assert gc.get_freeze_count() >= len(keep)
        with frozen_gc():  # nested (compose ahead inside a rank's lowering): still frozen after
            pass
        assert gc.get_freeze_count() >= len(keep)
    assert gc.get_freeze_count() == 0


def test_what_was_frozen_before_stays_frozen():
    gc.freeze()  # as a pool worker inherits it
    try:
        before = gc.get_freeze_count()
        with frozen_gc():
            pass
        assert gc.get_freeze_count() >= before > 0
    finally:
        gc.unfreeze()
