"""CurrentAssignmentBuilder's steps one by one (spec §1.7)."""

import uuid

from groupd.coordinator.consumer.group import (
    STABLE,
    UNKNOWN,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    Member,
)
from groupd.coordinator.consumer.reconcile import FENCED, reconcile

A = uuid.UUID(int=1)
B = uuid.UUID(int=2)
SUB = frozenset({A, B})


def free(topic, p):
    return -1


def member(state=STABLE, epoch=5, assigned=None, pending=None):
    return Member("m", epoch=epoch, previous_epoch=epoch - 1, state=state,
                  assigned=assigned or {}, pending_revocation=pending or {})


def test_stable_at_the_target_epoch_is_a_no_op():
    m = member(assigned={A: {0: 5}})
    assert reconcile(m, 5, {A: frozenset({0})}, None, SUB, False, free) is m


def test_new_partitions_are_taken_at_the_target_epoch():
    m = member(assigned={A: {0: 5}})
    out = reconcile(m, 6, {A: frozenset({0, 1})}, [(A, [0])], SUB, False, free)
    assert (out.state, out.epoch, out.previous_epoch) == (STABLE, 6, 5)
    assert out.assigned == {A: {0: 5, 1: 6}}  # the kept partition keeps its assignment epoch


def test_revocation_comes_first_and_keeps_the_epoch():
    m = member(assigned={A: {0: 5, 1: 5}})
    out = reconcile(m, 6, {A: frozenset({0}), B: frozenset({0})}, [(A, [0, 1])], SUB, False, free)
    assert (out.state, out.epoch) == (UNREVOKED_PARTITIONS, 5)
    assert out.assigned == {A: {0: 5}} and out.pending_revocation == {A: {1: 5}}
    # still owning the revoked partition: nothing changes
    assert reconcile(out, 6, {A: frozenset({0}), B: frozenset({0})}, [(A, [0, 1])], SUB, False, free) is out
    # an unknown owned list counts as still owning
    assert reconcile(out, 6, {A: frozenset({0}), B: frozenset({0})}, None, SUB, False, free) is out
    done = reconcile(out, 6, {A: frozenset({0}), B: frozenset({0})}, [(A, [0])], SUB, False, free)
    assert (done.state, done.epoch) == (STABLE, 6)
    assert done.assigned == {A: {0: 5}, B: {0: 6}} and done.pending_revocation == {}


def test_revoked_partitions_already_released_are_just_dropped():
    m = member(assigned={A: {0: 5, 1: 5}})
    out = reconcile(m, 6, {A: frozenset({0})}, [(A, [0])], SUB, False, free)
    assert (out.state, out.epoch, out.assigned) == (STABLE, 6, {A: {0: 5}})


def test_partitions_held_elsewhere_are_unreleased():
    def held(topic, p):
        return 5 if (topic, p) == (A, 1) else -1

    m = member(assigned={A: {0: 5}})
    out = reconcile(m, 6, {A: frozenset({0, 1, 2})}, [(A, [0])], SUB, False, held)
    assert (out.state, out.epoch, out.assigned) == (UNRELEASED_PARTITIONS, 6, {A: {0: 5, 2: 6}})
    # once released, the next step gives it
    out2 = reconcile(out, 6, {A: frozenset({0, 1, 2})}, [(A, [0, 2])], SUB, False, free)
    assert (out2.state, out2.assigned) == (STABLE, {A: {0: 5, 1: 6, 2: 6}})
    # nothing new but something unreleased: UNRELEASED with the target epoch
    only = reconcile(member(assigned={A: {0: 5}}), 6, {A: frozenset({0, 1})}, [(A, [0])], SUB, False, held)
    assert (only.state, only.epoch) == (UNRELEASED_PARTITIONS, 6)


def test_a_subscription_change_inside_an_epoch_revokes_dropped_topics():
    m = member(assigned={A: {0: 5}, B: {0: 5}})
    out = reconcile(m, 5, {A: frozenset({0}), B: frozenset({0})}, [(A, [0]), (B, [0])], frozenset({A}), True, free)
    assert (out.state, out.epoch) == (UNREVOKED_PARTITIONS, 5)
    assert out.assigned == {A: {0: 5}} and out.pending_revocation == {B: {0: 5}}
    # already released by the client: the assignment just shrinks
    out = reconcile(m, 5, {A: frozenset({0}), B: frozenset({0})}, [(A, [0])], frozenset({A}), True, free)
    assert (out.state, out.assigned) == (STABLE, {A: {0: 5}})


def test_target_of_unsubscribed_topics_is_ignored():
    m = member(epoch=5, assigned={})
    out = reconcile(m, 6, {A: frozenset({0}), B: frozenset({0})}, [], frozenset({A}), False, free)
    assert out.assigned == {A: {0: 6}}


def test_unknown_state_is_fenced_unless_the_member_owns_nothing():
    m = member(state=UNKNOWN, assigned={A: {0: 5}})
    assert reconcile(m, 6, {A: frozenset({0})}, None, SUB, False, free) == FENCED
    assert reconcile(m, 6, {A: frozenset({0})}, [(A, [0])], SUB, False, free) == FENCED
    out = reconcile(m, 6, {A: frozenset({0})}, [], SUB, False, free)
    assert (out.state, out.epoch) == (STABLE, 6)
