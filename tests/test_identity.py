"""Values kept by their object's identity (core/identity.ByIdentity)."""

from __future__ import annotations

from recommender.core.identity import ByIdentity


def test_a_value_is_made_once_per_object_not_per_equal_object_and_the_table_is_bounded() -> None:
    made: list[tuple[int, ...]] = []

    def make(key: tuple[int, ...]) -> str:
        made.append(key)
        return repr(key)

    kept: ByIdentity[tuple[int, ...], str] = ByIdentity(limit=2)
    a, equal_to_a = (1, 2), tuple([1, 2])
    assert kept.get(a, make) == "(1, 2)" and kept.get(a, make) == "(1, 2)"
    assert made == [a]
    kept.get(equal_to_a, make)  # equal, another object: made again
    assert len(made) == 2
    kept.get((3,), make)  # a third object fills the bound: the table starts over
    kept.get(a, make)
    assert len(made) == 4
