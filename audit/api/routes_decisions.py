"""Decisions: listing, one by id, and "why was <model> skipped?" for a decision or a pod."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import astuple
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.concurrency import run_in_threadpool

from audit.api import params, storeport
from audit.api.answers import AnswerCache
from audit.api.auth import Principal, redact_explanation, redact_stored
from audit.api.bodies import JSONResponse, json_bytes
from audit.api.deps import Settings, principal, settings, store, tenant_filter
from audit.api.pages import PageCache
from audit.api.problems import Problem
from audit.api.stored import admin_body, record_of
from audit.api.worldview import collector_paused, policy_at, world_at
from audit.explain import (
    Explanation,
    ModelTable,
    UnknownModel,
    check_model,
    explain,
    explain_record,
    known_models,
    would_get_now,
)
from audit.explain.record import names_model, record_models
from audit.explain.summary import would_get_sentence
from audit.policy import Policy, PolicyError
from audit.records import DecisionRecord, Outcome, Track
from audit.store.ports import StoreReads

router = APIRouter(prefix="/v1", tags=["decisions"])


MAX_LIMIT = 1000


def _shown(who: Principal, cfg: Settings, text: str) -> bytes:
    """The JSON body of a record the store keeps as ``text``, as the caller may see it."""
    return admin_body(text) if who.admin else json_bytes(redact_stored(text, cfg.auth.redaction))


@router.get("/decisions", summary="List decisions (newest first), cursor-paginated")
def list_decisions(
    request: Request, who: Annotated[Principal, Depends(principal)], db: Annotated[StoreReads, Depends(store)],
    cfg: Annotated[Settings, Depends(settings)],
    tenant: str | None = None, namespace: str | None = None, pod: str | None = None, model: str | None = None,
    outcome: str | None = None, fallback: str | None = None, since: str | None = None, until: str | None = None,
    policy_version: str | None = None, cluster: str | None = None, track: str | None = None,
    claim: str | None = None,
    cursor: Annotated[str | None, Query(max_length=1024)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 100,
) -> Response:
    f = storeport.decision_filter(
        tenant=tenant_filter(who, params.tenant(tenant)), namespace=params.k8s_name(namespace, "namespace"),
        pod=params.k8s_name(pod, "pod"), model=params.model(model), outcome=params.outcome(outcome),
        fallback=params.boolean(fallback, "fallback"), since=params.timestamp(since, "since"),
        until=params.timestamp(until, "until"), policy_version=params.policy_version(policy_version),
        cluster=params.cluster(cluster), track=params.track(track), claim=params.k8s_name(claim, "claim"))

    def page() -> bytes:
        texts, next_cursor = storeport.call(db.list_decision_texts, f, cursor or None, limit)
        # kept encoded: bytes are one object the collector never walks, where a page of record
        # dicts is thousands, and a page served again is not encoded again
        return b'{"items":[%b],"next":%b}' % (b",".join(_shown(who, cfg, t) for t in texts), orjson.dumps(next_cursor))

    key = (astuple(f), cursor or None, limit, who.scope, who.admin, cfg.auth.redaction)
    cache: PageCache = request.app.state.pages
    return Response(cache.get_or_compute(key, storeport.call(db.decisions_version), page), media_type="application/json")


async def _answers(request: Request) -> AnswerCache:
    cache: AnswerCache = request.app.state.answers
    return cache


def _text(db: StoreReads, who: Principal, checked: str, cache: AnswerCache, engine_only: bool = False) -> str:
    """The stored JSON text of decision ``checked`` within the caller's scope, or a 404 problem;
    ``engine_only`` for a caller that found the id index without it.

    One cached entry per decision and scope, which the record, its "why" and its body for each
    redaction are all made from: a decision asked about once is not read from the store again,
    whichever route asks next."""
    def lookup() -> str | None:
        read = db.engine_decision_text if engine_only else db.get_decision_text
        found: str | None = storeport.call(read, checked, who.scope)
        return found

    text = cache.get_or_compute(("decision text", checked, who.scope), lookup)
    if text is None:
        raise Problem("not-found", f"decision {checked} not found")
    return text


def _get(db: StoreReads, who: Principal, checked: str, cache: AnswerCache) -> DecisionRecord:
    return record_of(_text(db, who, checked, cache))


@router.get("/decisions/{decision}", summary="One decision record")
async def get_decision(decision: str, who: Annotated[Principal, Depends(principal)],
                       db: Annotated[StoreReads, Depends(store)], cfg: Annotated[Settings, Depends(settings)],
                       cache: Annotated[AnswerCache, Depends(_answers)]) -> Response:
    checked = params.decision_id(decision)
    # kept as the encoded body too: a hit then costs no parsing, and bytes are one object for the
    # collector to skip, where a record is dozens
    key = ("decision body", checked, who.scope, who.admin, cfg.auth.redaction)

    def indexed() -> bytes | None:
        answered, text = storeport.call(db.indexed_decision_text, checked, who.scope)
        if answered and text is None:
            raise Problem("not-found", f"decision {checked} not found")
        return None if text is None else _shown(who, cfg, text)

    def from_engine() -> bytes:
        return cache.keep(key, _shown(who, cfg, _text(db, who, checked, cache, engine_only=True)))

    # On the event loop while the answer is kept or in the id index (a read of a local file, no
    # engine query): the hand-over to a worker thread and back cost more than that read, and under
    # many readers each hand-over waits for the interpreter twice.
    body = cache.get_or_compute(key, indexed)
    if body is None:  # not kept, not in the index: the engine, from a worker thread
        body = await run_in_threadpool(from_engine)
    return Response(body, media_type="application/json")


def _policy_models(db: StoreReads, cache: AnswerCache, record: DecisionRecord) -> tuple[frozenset[str], bool]:
    """The models the device-model table of the policy in force at the record's ``seq`` names, in
    its cluster's stored world (``worldview.policy_at``; the default policy's while the store holds
    none of that world), and whether a rule of it takes the model from the attribute's text
    (``ModelTable.expands``: the models it gives are known only from the devices).

    Parsing a policy on every "why" cost more than the answer, so the models are kept once the
    store holds the world through that ``seq``, which no later event changes: under the record's
    policy digest when the policy found has it (every decision under that policy shares them),
    else under the record's ``seq`` (a record without a digest, or one the stored world does not
    agree with, keeps its own)."""
    key = ("policy models", record.cluster, record.policy_digest or record.seq)

    def read() -> tuple[int | None, Policy | None]:
        latest = db.max_seq(record.cluster)
        if latest is None:
            return None, None
        try:
            return latest, policy_at(db, record.cluster, min(record.seq, latest))
        except PolicyError:  # a stored policy that does not parse names no models of its own
            return latest, None

    def compute() -> tuple[frozenset[str], bool] | None:
        latest, policy = storeport.call(read)
        table = ModelTable.of(policy)
        models = (_DEFAULT_MODELS, False) if policy is None else (frozenset(table.known_models()), table.expands)
        if policy is None or latest is None or latest < record.seq or (
                record.policy_digest and policy.digest != record.policy_digest):
            provisional.append(models)  # the world through the record's seq may still arrive
            return None
        return models

    provisional: list[tuple[frozenset[str], bool]] = []
    found = cache.get_or_compute(key, compute)
    return found if found is not None else provisional[0]


# the models the default policy names, in force where a cluster's store holds no policy yet
# (its table names every model itself)
_DEFAULT_MODELS = frozenset(ModelTable.of(None).known_models())


def _device_models(db: StoreReads, cache: AnswerCache, record: DecisionRecord) -> frozenset[str]:
    """Every model of the cluster's world at the record's ``seq``: the table's own and those it
    gives the devices there (``audit.explain.known_models``), for a table some of whose models
    only the devices say. A world rebuilt for it, so kept per ``seq`` once the store holds the
    world through it; none (the table's own are asked apart) while it does not."""
    def compute() -> frozenset[str] | None:
        latest = storeport.call(db.max_seq, record.cluster)
        if latest is None or latest < record.seq:
            return None
        try:
            with collector_paused():
                view, policy = world_at(db, record.cluster, record.seq)
                return frozenset(known_models(view, policy))
        except storeport.STORE_ERRORS as exc:
            raise storeport.unavailable(exc) from None
        except ValueError:  # an object or the policy of that world is invalid: no device says more
            return frozenset()

    found = cache.get_or_compute(("device models", record.cluster, record.seq), compute)
    return found if found is not None else frozenset()


def _cluster_models(db: StoreReads, cache: AnswerCache, record: DecisionRecord, model: str) -> frozenset[str]:
    """The models ``model`` is checked against besides the record's own: the policy's
    (``_policy_models``), and only when it is none of them and the policy's table takes models
    from the attribute's text (``\\1``), those the table gives the devices of the world the
    decision saw (``_device_models``, which rebuilds that world)."""
    models, expands = _policy_models(db, cache, record)
    return models | _device_models(db, cache, record) if expands and model not in models else models


def _check_model(record: DecisionRecord, model: str | None, cluster_models: Callable[[str], frozenset[str]]) -> str:
    """``model`` when the record or the device-model table of the policy in force for it names it
    (or gives it to a device of the world the decision saw), else the ``unknown-model`` problem;
    ``cluster_models`` (``_cluster_models``) is asked only for a model the record does not name."""
    checked = params.model(model)
    if checked is None:
        raise Problem("invalid-parameter", "model: required, e.g. ?model=H100")
    named = record_models(record)
    if checked in named:
        return checked
    try:
        return check_model(checked, named | cluster_models(checked), "model", "this cluster or decision")
    except UnknownModel as exc:
        raise Problem("unknown-model", str(exc)) from None


def _would_get(db: StoreReads, record: DecisionRecord) -> dict[str, Any]:
    """What the record's pod would get if scheduled now, from the world at the cluster's latest seq."""
    seq = storeport.call(db.max_seq, record.cluster)
    if seq is None:
        return {"result": "unknown", "seq": -1, "error": f"cluster {record.cluster} has no world events"}
    try:
        with collector_paused():
            view, policy = world_at(db, record.cluster, seq)
            answer = would_get_now(view, (record.namespace, record.pod), policy)
    except ValueError as exc:  # the pod is gone, or an object of the current world is invalid
        return {"result": "unknown", "seq": seq, "error": str(exc)}
    return {**answer, "seq": seq}


def _summary(db: StoreReads, record: DecisionRecord, model: str) -> tuple[Explanation, bool]:
    """The answer without per-device detail, and whether it stays the answer (so may be kept).

    It is the record's, except for a device-plugin record asked about a model it does not name
    (neither the one the pod got nor one a blocker names): the world the decision saw (at its
    ``seq``) says what that model's GPUs were doing. While the store holds no world through that
    ``seq`` (records can arrive before their events), or the pod is not in it, the record answers
    for now: that it does not say (``explain_record``)."""
    if names_model(record, model):
        return explain_record(record, model), True
    try:
        latest = storeport.call(db.max_seq, record.cluster)
        if latest is not None and latest >= record.seq:
            with collector_paused():
                view, policy = world_at(db, record.cluster, record.seq)
                return explain(view, (record.namespace, record.pod), model, policy, record=record), True
    except storeport.STORE_ERRORS as exc:
        raise storeport.unavailable(exc) from None
    except ValueError:  # the pod is not in that world, or an object of it is invalid
        pass
    return explain_record(record, model), False


def _why(db: StoreReads, who: Principal, cfg: Settings, cache: AnswerCache, record: DecisionRecord,
         model: str | None, detail: str | None, next_step: bool) -> dict[str, Any]:
    """The answer for the record; ``next_step`` adds, for a pod the record left without devices,
    what it would get if scheduled now (``would_get``, apart from the recorded ``outcome``)."""
    return _answer(db, who, cfg, cache, record, model, detail, next_step)[0]


def _answer(db: StoreReads, who: Principal, cfg: Settings, cache: AnswerCache, record: DecisionRecord,
            model: str | None, detail: str | None, next_step: bool) -> tuple[dict[str, Any], bool]:
    """``_why``'s answer, and whether a summary answer may be kept (``_summary``)."""
    checked = _check_model(record, model, lambda asked: _cluster_models(db, cache, record, asked))
    if detail not in (None, "", "devices"):
        raise Problem("invalid-parameter", f"detail {detail[:40]!r}: expected 'devices' or nothing")
    if detail == "devices" and record.track == Track.DEVICE_PLUGIN.value:
        # the rebuilt world would only find a pod without claims; say what the pod is instead
        raise Problem("unexplainable", f"decision {record.decision_id}: pod {record.namespace}/{record.pod} asks "
                      "for GPUs through the device plugin, which names no devices, so there are no per-device "
                      "reasons; ask without detail=devices for the answer from the decision record")
    final = True
    if detail == "devices":
        try:
            # the explanation allocates per device over the rebuilt world; a full collection in
            # the middle walks all of it (~100 ms on 1,000 nodes), so it waits until the answer
            with collector_paused():
                view, policy = world_at(db, record.cluster, record.seq)
                result = explain(view, (record.namespace, record.pod), checked, policy, record=record, detail=True,
                                 viewer=who.scope)
        except storeport.STORE_ERRORS as exc:
            raise storeport.unavailable(exc) from None
        except ValueError as exc:  # ViewError, or an object or policy of the recorded world that is invalid
            raise Problem("unexplainable", f"decision {record.decision_id}: the world at seq {record.seq} "
                          f"cannot answer: {exc}") from None
    else:
        result, final = _summary(db, record, checked)
    body = result.to_dict()
    if next_step and record.outcome != Outcome.ALLOCATED.value:
        try:
            body["would_get"] = _would_get(db, record)
        except storeport.STORE_ERRORS as exc:
            raise storeport.unavailable(exc) from None
        if body["would_get"]["result"] != "unknown":
            body["summary"] = f"{body['summary']} {would_get_sentence(body['would_get'])}"
    return body if who.admin else redact_explanation(body, record.pod, cfg.auth.redaction, record), final


@router.get("/decisions/{decision}/why", summary="Why a decision did (not) get a device model")
async def why_decision(decision: str, who: Annotated[Principal, Depends(principal)],
                       db: Annotated[StoreReads, Depends(store)], cfg: Annotated[Settings, Depends(settings)],
                       cache: Annotated[AnswerCache, Depends(_answers)],
                       model: str | None = None, detail: str | None = None) -> JSONResponse:
    if detail:
        # rebuilt from the world each time: large, and rarely asked twice; the per-device answer,
        # which rebuilds a world anyway, also says what the pod would get now
        record = await run_in_threadpool(_get, db, who, params.decision_id(decision), cache)
        return JSONResponse(await run_in_threadpool(_why, db, who, cfg, cache, record, model, detail,
                                                    detail == "devices"))
    return JSONResponse(await run_in_threadpool(_why_summary, db, who, cfg, decision, model, cache))


def _why_summary(db: StoreReads, who: Principal, cfg: Settings, decision: str, model: str | None,
                 cache: AnswerCache) -> dict[str, Any]:
    """The summary answer, in one trip to the thread pool. It reads the record, or the world the
    decision saw (``_summary``), neither of which changes once stored, so it is kept unless it
    waits for that world."""
    checked = params.decision_id(decision)
    key = ("why", checked, who.scope, who.admin, model, cfg.auth.redaction)
    provisional: list[dict[str, Any]] = []

    def compute() -> dict[str, Any] | None:
        # a kept answer needs no record: the text is parsed only to compute one
        body, final = _answer(db, who, cfg, cache, _get(db, who, checked, cache), model, None, False)
        if final:
            return body
        provisional.append(body)
        return None

    body = cache.get_or_compute(key, compute)
    return body if body is not None else provisional[0]


@router.get("/pods/{namespace}/{name}/why",
            summary="Why the pod's latest decision did (not) get a device model, and what a pending pod would get now")
async def why_pod(namespace: str, name: str, who: Annotated[Principal, Depends(principal)],
                  db: Annotated[StoreReads, Depends(store)], cfg: Annotated[Settings, Depends(settings)],
                  cache: Annotated[AnswerCache, Depends(_answers)], model: str | None = None, detail: str | None = None,
                  cluster: str | None = None) -> JSONResponse:
    ns = params.k8s_name(namespace, "namespace")
    pod = params.k8s_name(name, "pod")
    cluster = params.cluster(cluster)
    if cluster is None:
        # a pod's name is unique within its cluster only: answering for the newest of two pods
        # of one name in different clusters would explain the wrong pod without a word
        clusters = await run_in_threadpool(storeport.call, db.pod_clusters, ns, pod, who.scope)
        if len(clusters) > 1:
            raise Problem("invalid-parameter", f"cluster: required: pod {namespace}/{name} has decisions in more than "
                          f"one cluster ({', '.join(clusters)}{', ...' if len(clusters) >= 5 else ''})")
    record = await run_in_threadpool(storeport.call, db.latest_for_pod, ns, pod, who.scope, cluster)
    if record is None:
        raise Problem("not-found", f"no decision for pod {namespace}/{name}" + (f" in cluster {cluster}" if cluster else ""))
    return JSONResponse(await run_in_threadpool(_why, db, who, cfg, cache, record, model, detail, True))
