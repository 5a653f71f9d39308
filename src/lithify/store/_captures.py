"""The capture index (``fact_captures``): which call each capture belongs to, decided by the
identity rule (``core.identity``) as captures are written, and read back one capture per call.

One module because the writing half (index new captures, decide again) and the reading half
(merge the facts rows with the captures read in their place) are two sides of one index layout.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from operator import itemgetter
from typing import Any

import msgspec

from lithify.core import codec
from lithify.core.identity import (
    Assignment,
    Capture,
    aliases,
    assign,
    capture_digest,
    content_keys,
    fill,
    lack,
    lacked_parts_sql,
    split_ids,
)
from lithify.model import InferenceCall
from lithify.store._backend import Backend
from lithify.store._query import Cursor, Query, _and, _select_in, fact_where
from lithify.store._rows import FACT_COLUMNS, QUERY_COLUMNS, VARIANT_COLUMNS, fact_row, now
from lithify.store._text import _fact_decoder
from lithify.store._types import FactFilter, InsertResult, StoredCapture


class _CapturesBusy(Exception):
    """Another writer holds the right to index captures: write the batch again, owning it."""


# fact_captures: every capture that shares an id with another, its rank (lack, sort_at,
# inference_call_id, digest), the columns reads filter and order on, its content keys, and the
# call the identity rule puts it in (core/identity.py).
_CAPTURED = (  # what a capture takes from its fact's columns
    "inference_call_id",
    "model_call_id",
    "session_id",
    "trace_id",
    "provider",
    "model",
    "source",
    "sort_at",
)
CAPTURE_COLUMNS = (
    "digest",
    "variant",  # 0: a facts row; 1: a fact_variants row
    "lack",  # identity.lack of the fact
    *_CAPTURED,
    "in_key",  # identity.content_keys: what agreement compares
    "out_key",
    "call",  # the digest of its call's first capture, the one reads give
    "call_id",  # its call's id: the first capture's id, or a derived one after a collision
    "collided",  # 1: its call shares an id with an earlier capture that contradicts it
    "kept",  # 1: the first capture of its call (call = digest)
)
_CAPTURED_AT = tuple(FACT_COLUMNS.index(c) for c in _CAPTURED)
_IS_VARIANT, _LACK, _ID, _MODEL_ID, _SESSION, _SORT_AT, _IN, _OUT, _CALL, _CALL_ID, _COLLIDED = (
    CAPTURE_COLUMNS.index(c)
    for c in (
        "variant",
        "lack",
        "inference_call_id",
        "model_call_id",
        "session_id",
        "sort_at",
        "in_key",
        "out_key",
        "call",
        "call_id",
        "collided",
    )
)
_KEPT = CAPTURE_COLUMNS.index("kept")
_DECISION = ("call", "call_id", "collided", "kept")
_RANK = "(lack, sort_at, inference_call_id, digest)"

# Whether any call has several captures: most stores have none, and read and write as before.
_ANY_CAPTURE = "SELECT 1 FROM fact_captures LIMIT 1"
# The first captures of the calls read as their fills (``identity.fill``).
_FILLED = "(SELECT digest FROM call_fills)"
# The columns filters read (``fact_where``), which fact_captures and call_fills both have.
_FILTERED = ("session_id", "model", "source", "provider", "trace_id", "sort_at")

# What became of each inserted row: a new call, a redelivery, or another capture of a call.
_STORED, _DUPLICATE, _VARIANT = range(3)


def _result(
    ids: Sequence[str], outcomes: Sequence[int], collision_ids: Sequence[str] = ()
) -> InsertResult:
    """``collision_ids``: the ids of the calls this write made collide (``_index_captures``)."""

    def having(outcome: int) -> list[str]:
        return [i for i, o in zip(ids, outcomes, strict=True) if o == outcome]

    duplicate_ids, variant_ids = having(_DUPLICATE), having(_VARIANT)
    inserted = len(ids) - len(duplicate_ids) - len(variant_ids)
    return InsertResult(
        inserted,
        len(duplicate_ids),
        duplicate_ids,
        len(variant_ids),
        variant_ids,
        len(collision_ids),
        list(collision_ids),
    )


def _capture(body: bytes, variant: int, columns: Iterable[Any]) -> tuple[Any, ...]:
    """The fact_captures row of the fact with these codec bytes (``columns``: its ``_CAPTURED``
    ones), a call of its own until decided."""
    fact = _fact_decoder.decode(body)
    digest = capture_digest(body)
    cols = tuple(columns)
    return (digest, variant, lack(fact), *cols, *content_keys(fact), digest, cols[0], 0, 1)


def _rank(capture: tuple[Any, ...]) -> tuple[int, str, str, bytes]:
    return capture[_LACK], capture[_SORT_AT], capture[_ID], bytes(capture[0])


def _classify(outcomes: list[int], new: dict[int, bytes], decided: dict[bytes, Assignment]) -> None:
    """What became of each row indexed as a capture (``new``: row index → digest): of a call
    that has captures from before, another capture (``_VARIANT``); of a call new in this
    write, the first such row is the call (``_STORED``) and the others are its other
    captures."""
    fresh = set(new.values())
    old_calls = {a.call for d, a in decided.items() if d not in fresh}
    counted: set[bytes] = set()
    for i in sorted(new):
        a = decided.get(new[i])
        if a is None:
            continue
        if a.call in old_calls or a.call in counted:
            outcomes[i] = _VARIANT
        else:
            counted.add(a.call)
            outcomes[i] = _STORED


def named(fact: InferenceCall, call_id: str | None) -> InferenceCall:
    """A call's first capture under its call id (the column form; ``None``: its own)."""
    if call_id is None or call_id == codec.col(fact.inference_call_id):
        return fact
    return msgspec.structs.replace(fact, inference_call_id=codec.uncol(call_id) or "")


def _view(capture: tuple[Any, ...]) -> Capture:
    """What the identity rule reads of a fact_captures row."""
    return Capture(
        bytes(capture[0]),
        capture[_LACK],
        capture[_SORT_AT],
        capture[_ID],
        capture[_MODEL_ID],
        capture[_SESSION],
        None if capture[_IN] is None else bytes(capture[_IN]),
        None if capture[_OUT] is None else bytes(capture[_OUT]),
    )


def _assignment(capture: tuple[Any, ...]) -> Assignment:
    return Assignment(bytes(capture[_CALL]), capture[_CALL_ID], bool(capture[_COLLIDED]))


def _captures_in(
    cur: Cursor, column: str, values: Iterable[Any], tail: str = "", params: Sequence[Any] = ()
) -> list[Any]:
    """The fact_captures rows whose ``column`` is one of ``values`` (and ``tail`` holds)."""
    head = f"SELECT {', '.join(CAPTURE_COLUMNS)} FROM fact_captures WHERE {column}"
    return _select_in(cur, head, values, tail, params)


def _linked_captures(
    cur: Cursor,
    ids: set[str],
    model_ids: set[str | None],
    tail: str = "",
    params: Sequence[Any] = (),
) -> tuple[dict[bytes, tuple[Any, ...]], set[str], set[str]]:
    """The fact_captures rows (where ``tail`` holds) that share an identity with these ids or
    model ids, or with one another, by digest; and every id and model id walked."""
    found: dict[bytes, tuple[Any, ...]] = {}
    seen_ids: set[str] = set()
    seen_model_ids: set[str] = set()
    todo_ids, todo_model_ids = set(ids), set(model_ids) - {None}
    while todo_ids or todo_model_ids:
        seen_ids |= todo_ids
        seen_model_ids |= todo_model_ids  # type: ignore[arg-type]
        rows = _captures_in(cur, "inference_call_id", todo_ids, tail, params)
        rows += _captures_in(cur, "model_call_id", todo_model_ids, tail, params)
        todo_ids, todo_model_ids = set(), set()
        for row in rows:
            if row[0] not in found:
                found[row[0]] = row
                todo_ids.add(row[_ID])
                todo_model_ids.add(row[_MODEL_ID])
        todo_ids -= seen_ids
        todo_model_ids -= seen_model_ids | {None}
    return found, seen_ids, seen_model_ids


def _resolved(
    main: Iterator[tuple[Any, ...]],
    dropped: Iterator[tuple[Any, ...]],
    kept: Iterator[tuple[Any, ...]],
    width: int,
) -> Iterator[tuple[bytes, bytes | None, str | None]]:
    """The bodies and digests of ``main`` without the rows whose key is in ``dropped``, with
    ``kept`` merged in; rows start with their key (``width`` columns, of ``kept`` the last is
    the call id it is read under), the three in one key order. Each body comes with its digest
    (the column after it) and that call id, or ``None`` (a ``main`` row, read under its own)."""
    skip = next(dropped, None)
    extra = next(kept, None)
    extra_key = None if extra is None else extra[:width]

    def horizon() -> Any:
        heads = [h[0] for h in (skip, extra_key) if h is not None]
        return min(heads) if heads else None

    edge = horizon()
    for row in main:
        # Contested calls are few: a row whose first key column is below the next one's
        # passes with one comparison.
        if edge is None or row[0] < edge:
            yield row[width], row[width + 1], None
            continue
        key = row[:width]
        while extra_key is not None and extra_key < key:
            yield extra[width], extra[width + 1], extra[width - 1]  # type: ignore[index]
            extra = next(kept, None)
            extra_key = None if extra is None else extra[:width]
        while skip is not None and skip < key:
            skip = next(dropped, None)
        if skip == key:
            skip = next(dropped, None)
        else:
            yield row[width], row[width + 1], None
        edge = horizon()
    while extra is not None:
        yield extra[width], extra[width + 1], extra[width - 1]
        extra = next(kept, None)


class CaptureIndex(Backend):
    """The capture index's half of a store."""

    _fills = True  # the schema has call_fills (migration 9)

    def _contested(self, cur: Cursor) -> bool:
        """Whether any call has several captures."""
        cur.execute(_ANY_CAPTURE)
        return cur.fetchone() is not None

    def _keep_captures(
        self,
        cur: Cursor,
        rows: list[tuple[Any, ...]],
        outcomes: list[int],
        own: bool,
        collisions: list[str],
        touched: set[str] | None = None,
        fills: list[tuple[Any, ...]] | None = None,
    ) -> None:
        """Keep the colliding rows that differ from every stored capture of their call as
        variants (their outcome becomes ``_VARIANT``), and index every capture of the calls
        they contest in fact_captures; the sessions of the captures indexed or decided again
        go to ``touched`` (their calls may have changed), the fills written to ``fills`` (as
        facts rows, for the text index)."""
        collided = [i for i, o in enumerate(outcomes) if o == _DUPLICATE]
        contested = self._contested(cur)
        if not collided and not contested:
            return  # the common batch: nothing collided and no call is contested
        captures: dict[bytes, tuple[Any, ...]] = {}
        new: dict[int, bytes] = {}  # row index → digest, of the rows indexed as captures
        if contested:
            # A new facts row may share an id with a variant of a stored call: a candidate.
            fresh = [i for i, o in enumerate(outcomes) if o == _STORED]
            ids = {
                c[_ID] for c in _captures_in(cur, "inference_call_id", {rows[i][0] for i in fresh})
            }
            model_ids = {
                c[_MODEL_ID]
                for c in _captures_in(cur, "model_call_id", {rows[i][1] for i in fresh} - {None})
            }
            for i in fresh:
                row = rows[i]
                if row[0] in ids or row[1] in model_ids:
                    c = _capture(self._codec_bytes(row[-1], cur), 0, (row[j] for j in _CAPTURED_AT))
                    captures[c[0]] = c
                    new[i] = c[0]
        stored = {
            f[0]: f
            for f in self._stored_facts(cur, "inference_call_id", {rows[i][0] for i in collided})
        }
        differing: list[tuple[int, bytes, bytes]] = []  # (row index, digest, codec bytes)
        seen: set[bytes] = set()
        for i in collided:
            body = self._codec_bytes(rows[i][-1], cur)
            same = stored.get(rows[i][0])
            if same is not None and bytes(same[-1]) == body:
                continue  # a redelivery of the stored fact: a duplicate
            digest = capture_digest(body)
            if digest not in seen:  # the same capture twice in a batch: the first is the variant
                seen.add(digest)
                differing.append((i, digest, body))
        if not differing and not captures:
            return  # only redeliveries: nothing to write
        if not own and not self._own_captures(cur):
            raise _CapturesBusy
        if differing:
            self._keep_variants(cur, rows, outcomes, differing, stored, captures, new)
        if captures:
            decided = self._index_captures(cur, list(captures.values()), collisions, touched, fills)
            _classify(outcomes, new, decided)
            if touched is not None:
                touched.update(c[_SESSION] for c in captures.values())

    def _stored_facts(self, cur: Cursor, column: str, values: Iterable[Any]) -> list[Any]:
        """The ``_CAPTURED`` columns and the codec bytes of the facts rows with these values."""
        head = f"SELECT {', '.join(_CAPTURED)}, {self._fact_body} FROM {self._fact_from} WHERE"
        join = self._cur_joiner(cur)
        return [(*f[:-1], join(f[-1])) for f in _select_in(cur, f"{head} {column}", values)]

    def _keep_variants(
        self,
        cur: Cursor,
        rows: list[tuple[Any, ...]],
        outcomes: list[int],
        differing: list[tuple[int, bytes, bytes]],
        stored: dict[str, Any],
        captures: dict[bytes, tuple[Any, ...]],
        new: dict[int, bytes],
    ) -> None:
        variant_rows = sorted(
            ((d, *rows[i][:-1], self._pack(rows[i][-1])) for i, d, _ in differing),
            key=itemgetter(0),
        )
        inserted = {r[0] for r in self._insert(cur, "fact_variants", VARIANT_COLUMNS, variant_rows)}
        linked: dict[str, Any] = {}  # the facts rows they share an inference_call_id with
        model_ids: set[str] = set()
        for i, digest, body in differing:
            if digest not in inserted:
                continue  # a variant stored before: a duplicate
            row = rows[i]
            outcomes[i] = _VARIANT
            captures[digest] = _capture(body, 1, (row[j] for j in _CAPTURED_AT))
            new[i] = digest
            if row[0] in stored:
                linked[row[0]] = stored[row[0]]
            if row[1] is not None:
                model_ids.add(row[1])
        # The facts rows the variants collide with are captures of the contested calls too.
        for f in [*linked.values(), *self._stored_facts(cur, "model_call_id", model_ids)]:
            c = _capture(bytes(f[-1]), 0, f[:-1])
            captures.setdefault(c[0], c)

    def _rebuild_captures(self, cur: Cursor) -> None:
        """Index the captures of every contested call afresh (fact_captures is empty): each
        variant, and the facts rows that share an identity with one."""
        cur.execute(f"SELECT {', '.join(_CAPTURED)}, {self._variant_body} FROM fact_variants")
        join = self._cur_joiner(cur)
        variants = [(*v[:-1], join(v[-1])) for v in cur.fetchall()]
        if self._fills:
            cur.execute("DELETE FROM call_fills")
        if not variants:
            return
        captures: dict[bytes, tuple[Any, ...]] = {}
        for v in variants:
            c = _capture(bytes(v[-1]), 1, v[:-1])
            captures[c[0]] = c
        ids = {v[0] for v in variants}
        model_ids = {v[1] for v in variants} - {None}
        for f in [
            *self._stored_facts(cur, "inference_call_id", ids),
            *self._stored_facts(cur, "model_call_id", model_ids),
        ]:
            c = _capture(bytes(f[-1]), 0, f[:-1])
            captures.setdefault(c[0], c)
        self._index_captures(cur, list(captures.values()))

    def _index_captures(
        self,
        cur: Cursor,
        captures: list[tuple[Any, ...]],
        collisions: list[str] | None = None,
        touched: set[str] | None = None,
        fills: list[tuple[Any, ...]] | None = None,
    ) -> dict[bytes, Assignment]:
        """Add captures to fact_captures, then decide again which call each capture belongs
        to wherever the new ones may change it; the calls of the captures decided and of the
        earlier ones they were decided against, by digest. The ids of the calls that now
        collide and did not before are added to ``collisions``."""
        new = {
            bytes(r[0])
            for r in self._insert(
                cur, "fact_captures", CAPTURE_COLUMNS, sorted(captures, key=_rank)
            )
        }
        seeds = [c for c in captures if c[0] in new]
        if not seeds:
            return {}
        # The rule goes in rank order, so decisions only change from the first new capture on,
        # and only through ids shared with a new one: walk those captures, then read the
        # earlier captures that share their ids (and their calls' first captures).
        first = _rank(min(seeds, key=_rank))
        after = f" AND {_RANK} >= (?, ?, ?, ?)"
        before = f" AND {_RANK} < (?, ?, ?, ?)"
        found, ids, model_ids = _linked_captures(
            cur, {c[_ID] for c in seeds}, {c[_MODEL_ID] for c in seeds}, after, first
        )
        prior = {
            bytes(r[0]): r
            for r in [
                *_captures_in(cur, "inference_call_id", ids, before, first),
                *_captures_in(cur, "model_call_id", model_ids, before, first),
            ]
        }
        earlier = sorted(prior.values(), key=_rank)
        heads = {bytes(r[_CALL]) for r in earlier} - prior.keys()
        reps = _captures_in(cur, "digest", heads) if heads else []
        ranked = sorted(found.values(), key=_rank)
        if touched is not None:
            touched.update(r[_SESSION] for r in (*ranked, *earlier, *reps))
        decided = {bytes(r[0]): _assignment(r) for r in earlier}
        for c, a in zip(
            ranked,
            assign(
                (_view(c) for c in ranked),
                ((_view(r), _assignment(r)) for r in earlier),
                (_view(r) for r in reps),
            ),
            strict=True,
        ):
            digest = bytes(c[0])
            decided[digest] = a
            kept = int(a.call == digest)
            if collisions is not None and kept and a.collided and not (c[_KEPT] and c[_COLLIDED]):
                collisions.append(codec.uncol(a.call_id) or "")
            if _assignment(c) != a or c[_KEPT] != kept:
                cur.execute(
                    f"UPDATE fact_captures SET {' = ?, '.join(_DECISION)} = ? WHERE digest = ?",
                    (a.call, a.call_id, int(a.collided), kept, digest),
                )
        if self._fills:
            self._fill_calls(cur, decided, touched, fills)
        return decided

    def _fill_calls(
        self,
        cur: Cursor,
        decided: dict[bytes, Assignment],
        touched: set[str] | None,
        fills: list[tuple[Any, ...]] | None,
    ) -> None:
        """Write again the fills (``call_fills``) of the calls of these decisions: each call
        read with what its first capture left empty taken from its others (``identity.fill``),
        where that differs from the first capture; their sessions go to ``touched``, and the
        fills, as facts rows, to ``fills``."""
        calls = {a.call for a in decided.values()}
        _select_in(
            cur, "DELETE FROM call_fills WHERE digest", calls | decided.keys(), " RETURNING 1"
        )
        # By call id (indexed; each call has its own): every capture of those calls. The
        # decisions cover every capture sharing an id with the new ones (_index_captures), so
        # these are all the captures of their ids too.
        found = _captures_in(cur, "call_id", {a.call_id for a in decided.values()})
        # A call takes a half of its messages from another capture only while no capture of
        # its ids is another call's (identity.fill, ``halves``).
        split = split_ids((c[_ID], bytes(c[_CALL])) for c in found)
        groups: dict[bytes, list[tuple[Any, ...]]] = {}
        for c in sorted(found, key=_rank):
            groups.setdefault(bytes(c[_CALL]), []).append(c)
        contested = [g for g in groups.values() if len(g) > 1]
        if not contested:
            return
        bodies = self._capture_bodies(cur, [c for g in contested for c in g])
        at = now()
        rows: list[tuple[Any, ...]] = []
        blobs: dict[bytes, bytes] = {}
        for g in contested:
            # A call's first capture ranks before its others.
            first, *others = (_fact_decoder.decode(bodies[bytes(c[0])]) for c in g)
            filled = fill(first, others, halves=not {c[_ID] for c in g} & split)
            if filled is first:
                continue
            row = fact_row(filled, at)
            stored, found = codec.split_blobs(row[-1], self.blob_min)
            blobs.update(found)
            rows.append((bytes(g[0][0]), *row[:-1], self._pack(stored)))
            if touched is not None:
                touched.add(row[FACT_COLUMNS.index("session_id")])
        if blobs:
            self._insert_blobs(cur, blobs)
        if rows:
            self._insert(cur, "call_fills", VARIANT_COLUMNS, rows)
            if fills is not None:
                fills.extend(r[1:] for r in rows)

    def _fill_conds(self) -> tuple[str, str]:
        """SQL conditions to append on fact_captures: ``OR`` its capture is read as a fill, and
        ``AND`` it is not (empty without call_fills)."""
        if not self._fills:
            return "", ""
        return f" OR digest IN {_FILLED}", f" AND digest NOT IN {_FILLED}"

    def _call_bodies(
        self, query: Query, where: str, params: list[Any], order: str, contested: bool
    ) -> Iterator[tuple[bytes, bytes | None, str | None]]:
        """The bodies of the calls whose first capture matches ``where``, in ``order``
        (columns), each with its kept digest (``json_sha256``, ``None`` when it has none) and
        its call id when it is not the capture's own (``None``): of the captures of a contested
        call, the first, at its own place, under its call's id."""
        fact_sha, sha = (self._fact_sha, "json_sha256") if self._digests else ("NULL", "NULL")
        body = f"{self._fact_body}, {fact_sha}"
        if not contested:  # no capture shares an id: the facts rows are the calls
            sql = f"SELECT {body} FROM {self._fact_from}{where} ORDER BY {order}"
            for data, digest in query(sql, params):
                yield data, digest, None
            return
        main = query(
            f"SELECT {order}, {body} FROM {self._fact_from}{where} ORDER BY {order}", params
        )
        # facts rows that are not the first capture of their call, or are read under another id
        filled, unfilled = self._fill_conds()
        dropped = query(
            f"SELECT {order} FROM fact_captures{_and(where, 'variant = 0')} AND "
            f"(kept = 0 OR call_id <> inference_call_id{filled}) ORDER BY {order}",
            params,
        )
        # the first captures read in their place, ordered by their calls' ids: variants, and
        # facts rows read under another id
        keys = order.split(", ")[:-1]

        def firsts(call_id: str, body: str, table: str, cond: str) -> str:
            cols = ", ".join([*keys, f"({call_id}) AS call_id", body])
            return f"SELECT {cols} FROM {table}{_and(where, cond)}"

        variant = f"{self._variant_body} AS body, {sha} AS json_sha256"
        variants = firsts(
            "SELECT call_id FROM fact_captures AS c WHERE c.digest = v.digest",
            variant,
            "fact_variants AS v",
            f"digest IN (SELECT digest FROM fact_captures WHERE variant = 1 AND kept = 1"
            f"{unfilled})",
        )
        renamed = firsts(
            "SELECT call_id FROM fact_captures AS c "
            "WHERE c.variant = 0 AND c.inference_call_id = facts.inference_call_id",
            f"{self._fact_body} AS body, {fact_sha} AS json_sha256",
            self._fact_from,
            "inference_call_id IN (SELECT inference_call_id FROM fact_captures "
            f"WHERE variant = 0 AND kept = 1 AND call_id <> inference_call_id{unfilled})",
        )
        parts = [variants, renamed]
        if self._fills:  # calls read as their fills, at the fill's place
            parts.append(
                firsts(
                    "SELECT call_id FROM fact_captures AS c WHERE c.digest = f.digest",
                    variant,
                    "call_fills AS f",
                    "1 = 1",
                )
            )
        kept = query(
            f"SELECT * FROM ({' UNION ALL '.join(parts)}) AS k "
            f"ORDER BY {', '.join([*keys, 'call_id'])}",
            params * len(parts),
        )
        yield from _resolved(main, dropped, kept, order.count(",") + 1)

    def _capture_bodies(
        self, cur: Cursor, captures: Sequence[tuple[Any, ...]]
    ) -> dict[bytes, bytes]:
        """The codec bytes of these fact_captures rows, by digest."""
        facts = self._stored_facts(
            cur, "inference_call_id", {c[_ID] for c in captures if not c[_IS_VARIANT]}
        )
        bodies = {capture_digest(bytes(f[-1])): bytes(f[-1]) for f in facts}
        join = self._cur_joiner(cur)
        for digest, body in _select_in(
            cur,
            f"SELECT digest, {self._variant_body} FROM fact_variants WHERE digest",
            [bytes(c[0]) for c in captures if c[_IS_VARIANT]],
        ):
            bodies[bytes(digest)] = join(body)
        return bodies

    def _call_body(self, cur: Cursor, first: tuple[Any, ...]) -> bytes:
        """The codec bytes a call is read as, from its first capture's fact_captures row: its
        fill, else that capture."""
        if self._fills:
            cur.execute(
                f"SELECT {self._variant_body} FROM call_fills WHERE digest = ?", (first[0],)
            )
            row = cur.fetchone()
            if row is not None:
                return self._cur_joiner(cur)(row[0])
        return self._capture_bodies(cur, [first])[bytes(first[0])]

    def captures(self, inference_call_id: str) -> list[StoredCapture]:
        """Every stored capture of the call this id names (a call id, or a capture's id), and
        of the captures linked to it through shared ids, in the identity rule's rank order,
        each with its call's id and whether it is the one read; ``[]`` when nothing has it."""
        key = codec.col(inference_call_id)

        def q(cur: Cursor) -> list[tuple[bytes, bool, str]]:
            found: dict[bytes, tuple[Any, ...]] = {}
            if self._contested(cur):
                ids = {key} | {c[_ID] for c in _captures_in(cur, "call_id", {key})}
                found = _linked_captures(cur, ids, set())[0]
            if not found:  # a capture that shares no id: its facts row alone
                return [
                    (bytes(f[-1]), True, key)
                    for f in self._stored_facts(cur, "inference_call_id", {key})
                ]
            ranked = sorted(found.values(), key=_rank)
            bodies = self._capture_bodies(cur, ranked)
            return [(bodies[bytes(c[0])], bool(c[_KEPT]), c[_CALL_ID]) for c in ranked]

        return [
            StoredCapture(_fact_decoder.decode(body), kept, codec.uncol(call_id) or "")
            for body, kept, call_id in self._run(q, write=False)
        ]

    def call_aliases(self, ids: Iterable[str]) -> dict[str, str]:
        """Which of ``ids`` name captures of one call only without being a call's id, each
        with that call's id (``identity.aliases``): feedback naming them joins that call. Only
        captures that share an id have such ids: at most one entry per id asked about."""
        wanted = {codec.col(i) for i in ids if isinstance(i, str)}

        def q(cur: Cursor) -> dict[str, str]:
            if not wanted or not self._contested(cur):
                return {}
            rows = [
                *_captures_in(cur, "inference_call_id", wanted),
                *_captures_in(cur, "call_id", wanted, " AND kept = 1"),
            ]
            found = aliases((c[_ID], c[_CALL_ID], bool(c[_KEPT])) for c in rows)
            return {k: v for k, v in found.items() if k in wanted}

        found = self._run(q, write=False)
        return {codec.uncol(k) or "": codec.uncol(v) or "" for k, v in found.items()}

    def _calls(self, cur: Cursor) -> str:
        """What to select calls from: the facts table, or (when captures share ids) the first
        capture of every call (its fill where it has one), on its own columns, as a table named
        ``facts``."""
        if not self._contested(cur):
            return "facts"
        cols = ", ".join(QUERY_COLUMNS)
        filled, unfilled = self._fill_conds()
        fills = f" UNION ALL SELECT {cols} FROM call_fills" if self._fills else ""
        return (
            f"(SELECT {cols} FROM facts WHERE inference_call_id NOT IN (SELECT "
            f"inference_call_id FROM fact_captures WHERE variant = 0 AND (kept = 0{filled})) "
            f"UNION ALL SELECT {cols} FROM fact_variants WHERE digest IN (SELECT digest FROM "
            f"fact_captures WHERE variant = 1 AND kept = 1{unfilled}){fills}) AS facts"
        )

    def _left_out_sql(self, where: str, cond: str | None = None) -> str:
        """Counts the dropped captures (``kept = 0``) of the calls ``where`` matches: each
        joined to its call's first capture (``k``: ``call`` is that capture's digest) and fill
        (``f``), the filters applied to the call's columns, not the capture's own (a proxy's
        capture without a session belongs to the session of the span read in its place)."""
        if self._fills:
            cols = [f"COALESCE(f.{c}, k.{c}) AS {c}" for c in _FILTERED]
            join = " LEFT JOIN call_fills AS f ON f.digest = d.call"
        else:
            cols, join = [f"k.{c} AS {c}" for c in _FILTERED], ""
        return (
            f"SELECT COUNT(*) FROM (SELECT {', '.join(cols)}, d.lack AS lack, k.lack AS read_lack "
            f"FROM fact_captures AS d JOIN fact_captures AS k ON k.digest = d.call{join} "
            f"WHERE d.kept = 0) AS x{_and(where, cond)}"
        )

    def count_dropped(self, filters: FactFilter | None = None) -> int:
        """Captures the capture rule drops (other captures of stored calls) of the calls
        ``filters`` match: what ``order="session"`` reads leaves out."""
        where, params = fact_where(filters)
        return self._scalar(self._left_out_sql(where), params)

    def _richer_dropped_sql(self, where: str) -> str:
        # The parts field of a dropped capture's lack is the lower: it holds more parts than
        # the capture read.
        return self._left_out_sql(
            where, f"{lacked_parts_sql('lack')} < {lacked_parts_sql('read_lack')}"
        )

    def count_richer_dropped(self, filters: FactFilter | None = None) -> int:
        """Of ``count_dropped``, the captures holding more message parts than the capture
        their call is read from (``DeriveStats.richer_dropped``): parts no row carries."""
        where, params = fact_where(filters)
        return self._scalar(self._richer_dropped_sql(where), params)

    def get_fact(self, inference_call_id: str) -> InferenceCall | None:
        """The call with this id (under its call id, read from its first capture), else the
        stored capture with this id; ``None`` when neither exists."""
        key = codec.col(inference_call_id)

        def q(cur: Cursor) -> tuple[bytes, str] | None:
            if self._contested(cur):
                for c in _captures_in(cur, "call_id", {key}, " AND kept = 1"):
                    return self._call_body(cur, c), c[_CALL_ID]
            for f in self._stored_facts(cur, "inference_call_id", {key}):
                return bytes(f[-1]), key
            return None

        found = self._run(q, write=False)
        return None if found is None else named(_fact_decoder.decode(found[0]), found[1])
