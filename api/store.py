"""Persistence: keyword-only functions over the tables of ``db.py``."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from api.db import calibrations, clusters, jobs, plans

ACTIVE_STATES = ("queued", "running")


def now() -> datetime:
    return datetime.now(timezone.utc)


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


def _iso(row: Any) -> dict[str, Any]:
    """A row (a RowMapping or a dict) with its datetimes as ISO strings."""
    out = dict(row)
    for k, v in out.items():
        if isinstance(v, datetime):
            out[k] = (v if v.tzinfo else v.replace(tzinfo=timezone.utc)).isoformat()
    return out


# -- plans -------------------------------------------------------------------------------------

def save_plan(*, engine: Engine, plan_id: str, model_name: str, cluster_name: str, status: str,
              request: dict, result: dict) -> tuple[dict, bool]:
    """Store a plan result; (row, created). An identical request stored before wins."""
    row = {"id": plan_id, "created_at": now(), "model_name": model_name,
           "cluster_name": cluster_name, "status": status, "request": request, "result": result}
    try:
        with engine.begin() as conn:
            conn.execute(plans.insert().values(**row))
        return _iso(row), True
    except IntegrityError:
        existing = get_plan(engine=engine, plan_id=plan_id)
        assert existing is not None
        return existing, False


def get_plan(*, engine: Engine, plan_id: str) -> dict | None:
    with engine.connect() as conn:
        row = conn.execute(plans.select().where(plans.c.id == plan_id)).mappings().first()
    return _iso(row) if row else None


def list_plans(*, engine: Engine, limit: int, offset: int, model: str | None = None,
               cluster: str | None = None) -> tuple[list[dict], int]:
    cond: sa.ColumnElement[bool] = sa.true()
    if model:
        cond = sa.and_(cond, plans.c.model_name == model)
    if cluster:
        cond = sa.and_(cond, plans.c.cluster_name == cluster)
    with engine.connect() as conn:
        count = conn.execute(sa.select(sa.func.count()).select_from(plans).where(cond)).scalar_one()
        rows = conn.execute(
            plans.select().where(cond).order_by(plans.c.created_at.desc(), plans.c.id.desc())
            .limit(limit).offset(offset)).mappings().all()
    return [_iso(r) for r in rows], int(count)


# -- clusters ----------------------------------------------------------------------------------

def create_cluster(*, engine: Engine, name: str, spec: dict) -> dict:
    row = {"id": new_id("cl"), "name": name, "created_at": now(), "spec": spec}
    with engine.begin() as conn:
        conn.execute(clusters.insert().values(**row))
    return _iso(row)


def get_cluster(*, engine: Engine, cluster_id: str) -> dict | None:
    with engine.connect() as conn:
        row = conn.execute(clusters.select().where(clusters.c.id == cluster_id)).mappings().first()
    return _iso(row) if row else None


def list_clusters(*, engine: Engine, limit: int, offset: int) -> tuple[list[dict], int]:
    with engine.connect() as conn:
        count = conn.execute(sa.select(sa.func.count()).select_from(clusters)).scalar_one()
        rows = conn.execute(clusters.select().order_by(clusters.c.created_at.desc(),
                                                       clusters.c.id.desc())
                            .limit(limit).offset(offset)).mappings().all()
    return [_iso(r) for r in rows], int(count)


def delete_cluster(*, engine: Engine, cluster_id: str) -> bool:
    with engine.begin() as conn:
        return conn.execute(clusters.delete().where(clusters.c.id == cluster_id)).rowcount > 0


# -- jobs --------------------------------------------------------------------------------------

def claim_job(*, engine: Engine, job_id: str, owner: str, until: datetime | None = None,
              taking_over: str | None = None) -> bool:
    """Start a queued job for ``owner`` (one claimant wins): running, owned, leased until
    ``until`` (the embedded engine's lease; None where the queue engine watches the worker),
    one more attempt. With ``taking_over`` (a LIKE pattern), a running job whose owner
    matches it (an earlier attempt that stopped) is taken over too."""
    claimable = jobs.c.state == "queued"
    if taking_over is not None:
        claimable = claimable | ((jobs.c.state == "running") & jobs.c.owner.like(taking_over))
    with engine.begin() as conn:
        return conn.execute(jobs.update().where(jobs.c.id == job_id).where(claimable)
                            .values(state="running", started_at=now(), progress=0.05,
                                    owner=owner, lease_until=until,
                                    attempts=jobs.c.attempts + 1)).rowcount > 0


def create_job(*, engine: Engine, kind: str, request: dict) -> dict:
    row = {"id": new_id("job"), "kind": kind, "state": "queued", "progress": 0.0,
           "request": request, "result": None, "error": None, "created_at": now(),
           "started_at": None, "finished_at": None}
    with engine.begin() as conn:
        conn.execute(jobs.insert().values(**row))
    return _iso(row)


def get_job(*, engine: Engine, job_id: str) -> dict | None:
    with engine.connect() as conn:
        row = conn.execute(jobs.select().where(jobs.c.id == job_id)).mappings().first()
    return _iso(row) if row else None


def list_jobs(*, engine: Engine, limit: int, offset: int, state: str | None = None
              ) -> tuple[list[dict], int]:
    cond: sa.ColumnElement[bool] = sa.true() if not state else jobs.c.state == state
    with engine.connect() as conn:
        count = conn.execute(sa.select(sa.func.count()).select_from(jobs).where(cond)).scalar_one()
        rows = conn.execute(jobs.select().where(cond).order_by(jobs.c.created_at.desc(),
                                                               jobs.c.id.desc())
                            .limit(limit).offset(offset)).mappings().all()
    return [_iso(r) for r in rows], int(count)


def update_job(*, engine: Engine, job_id: str, only_if: tuple[str, ...] | None = None,
               held_by: str | None = None, **values: Any) -> bool:
    """Set fields of a job, optionally only while it is in one of ``only_if`` states (so a
    cancelled job is never overwritten by the worker that was running it) and, with
    ``held_by``, only while that replica holds it (a job whose lease lapsed and was failed by
    another replica keeps that outcome)."""
    stmt = jobs.update().where(jobs.c.id == job_id)
    if only_if:
        stmt = stmt.where(jobs.c.state.in_(only_if))
    if held_by is not None:
        stmt = stmt.where(jobs.c.owner == held_by)
    with engine.begin() as conn:
        return conn.execute(stmt.values(**values)).rowcount > 0


def renew_leases(*, engine: Engine, owner: str, until: datetime) -> int:
    """Extend the leases of the jobs this replica is running."""
    with engine.begin() as conn:
        return conn.execute(jobs.update().where(jobs.c.state == "running")
                            .where(jobs.c.owner == owner)
                            .values(lease_until=until)).rowcount


# What a job that lost its process (or its queue job) is set to: queued again, not held.
QUEUED_AGAIN: dict[str, Any] = {"state": "queued", "owner": None, "lease_until": None,
                                "progress": 0.0, "started_at": None}


def interrupted(detail: str) -> dict:
    """The problem stored on a job failed because its process stopped, not its input."""
    return {"type": "/problems/interrupted", "title": "Job interrupted", "status": 500,
            "detail": detail}


def requeue_or_fail(*, engine: Engine, running: sa.ColumnElement[bool], max_attempts: int,
                    detail: str) -> tuple[int, int]:
    """Running jobs matching ``running`` that lost their process: queued again while they
    have attempts left, failed with ``detail`` after. Returns (queued again, failed)."""
    cond = (jobs.c.state == "running") & running
    # Each statement names the attempts it acts on: under READ COMMITTED the second one sees
    # rows committed after the first, and a running job that appears between them (written by
    # another process) must be queued again by its own attempts, not failed as left over.
    with engine.begin() as conn:
        retried = conn.execute(jobs.update().where(cond).where(jobs.c.attempts < max_attempts)
                               .values(**QUEUED_AGAIN)).rowcount
        failed = conn.execute(jobs.update().where(cond).where(jobs.c.attempts >= max_attempts)
                              .values(state="failed", error=interrupted(detail),
                                      finished_at=now())).rowcount
    return retried, failed


def lease_lapsed() -> sa.ColumnElement[bool]:
    """A job holds no live lease: none was taken (the queue engine watches its worker
    instead), or the embedded engine's lease ran out."""
    return sa.or_(jobs.c.lease_until.is_(None), jobs.c.lease_until < now())


def expire_jobs(*, engine: Engine, max_attempts: int) -> tuple[int, int]:
    """Jobs running on a replica whose lease lapsed (it stopped or lost the database): queued
    again while they have attempts left, failed after. Jobs other replicas are running, with
    live leases, are left alone. Returns (retried, failed)."""
    return requeue_or_fail(engine=engine, running=lease_lapsed(), max_attempts=max_attempts,
                           detail=f"the service stopped while this job was running (its lease "
                                  f"lapsed), {max_attempts} time(s)")


def queued_job_ids(*, engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return [r[0] for r in conn.execute(sa.select(jobs.c.id).where(jobs.c.state == "queued")
                                           .order_by(jobs.c.created_at))]


def job_counts(*, engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        rows = conn.execute(sa.select(jobs.c.state, sa.func.count()).group_by(jobs.c.state))
        return {state: int(n) for state, n in rows}


# -- calibrations ------------------------------------------------------------------------------

def save_calibration(*, engine: Engine, cluster_id: str | None, body: dict) -> dict:
    """Store a calibration result (its ``id`` is assigned here and written into the body)."""
    cal_id = new_id("cal")
    body = {**body, "id": cal_id}
    row = {"id": cal_id, "cluster_id": cluster_id, "created_at": now(),
           "source": body["source"], "body": body, "stack": body.get("stack")}
    with engine.begin() as conn:
        conn.execute(calibrations.insert().values(**row))
    return _iso(row)


def get_calibration(*, engine: Engine, calibration_id: str) -> dict | None:
    with engine.connect() as conn:
        row = conn.execute(calibrations.select().where(calibrations.c.id == calibration_id)
                           ).mappings().first()
    return _iso(row) if row else None


def list_calibrations(*, engine: Engine, cluster_id: str, limit: int, offset: int,
                      source: str | None = None, stack: str | None = None
                      ) -> tuple[list[dict], int]:
    c = calibrations.c
    cond = c.cluster_id == cluster_id
    if source is not None:
        cond = sa.and_(cond, c.source == source)
    if stack is not None:
        cond = sa.and_(cond, c.stack == stack)
    with engine.connect() as conn:
        count = conn.execute(sa.select(sa.func.count()).select_from(calibrations).where(cond)
                             ).scalar_one()
        rows = conn.execute(calibrations.select().where(cond)
                            .order_by(calibrations.c.created_at.desc(), calibrations.c.id.desc())
                            .limit(limit).offset(offset)).mappings().all()
    return [_iso(r) for r in rows], int(count)


def latest_calibration(*, engine: Engine, cluster_id: str, anchor: bool = False,
                       stack: str | None = None) -> dict | None:
    """The cluster's newest calibration of collectives, or with ``anchor`` its newest anchor
    (measured steps: the stack's speeds) of ``stack`` (None: of no named stack), or None."""
    c = calibrations.c
    if anchor:
        cond = sa.and_(c.cluster_id == cluster_id, c.source == "anchor",
                       c.stack.is_(None) if stack is None else c.stack == stack)
    else:
        cond = sa.and_(c.cluster_id == cluster_id, c.source != "anchor")
    with engine.connect() as conn:
        row = conn.execute(calibrations.select().where(cond)
                           .order_by(calibrations.c.created_at.desc(), calibrations.c.id.desc())
                           .limit(1)).mappings().first()
    return _iso(row) if row else None


def anchor_stacks(*, engine: Engine, cluster_id: str) -> list[str]:
    """The named stacks the cluster holds anchors of, sorted."""
    c = calibrations.c
    with engine.connect() as conn:
        rows = conn.execute(sa.select(c.stack).distinct().where(
            c.cluster_id == cluster_id, c.source == "anchor", c.stack.is_not(None))).all()
    return sorted(r[0] for r in rows)
