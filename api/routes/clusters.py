"""Named clusters that plan requests can reference as {"id": ...}."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Response

from api import store
from api.links import links
from api.problems import PROBLEM_RESPONSES, not_found
from api.routes.deps import READ, WRITE, EngineDep, Limit, Offset
from api.routes.examples import CLUSTER_EXAMPLES
from api.schemas import ClusterCreate, ClusterPublic, Page

router = APIRouter(prefix="/v1", tags=["clusters"], responses=PROBLEM_RESPONSES)


@router.post("/clusters", status_code=201, response_model=ClusterPublic, dependencies=WRITE,
             summary="Store a cluster", operation_id="clusters-create",
             responses={201: links("cluster_id", "clusters-get", "clusters-delete",
                                   "calibrations-create")})
def create_cluster(body: Annotated[ClusterCreate, Body(openapi_examples=CLUSTER_EXAMPLES)],
                   response: Response, engine: EngineDep):
    """Store a cluster (a preset with overrides, or explicit topology, GPU and links)."""
    row = store.create_cluster(engine=engine, name=body.name,
                               spec=body.model_dump(mode="json"))
    response.headers["Location"] = f"/v1/clusters/{row['id']}"
    return row


@router.get("/clusters/{cluster_id}", response_model=ClusterPublic, dependencies=READ,
            summary="Read a cluster", operation_id="clusters-get")
def get_cluster(cluster_id: str, engine: EngineDep):
    """A stored cluster."""
    row = store.get_cluster(engine=engine, cluster_id=cluster_id)
    if row is None:
        raise not_found("cluster", cluster_id)
    return row


@router.get("/clusters", response_model=Page[ClusterPublic], dependencies=READ,
            summary="List clusters", operation_id="clusters-list")
def list_clusters(engine: EngineDep, limit: Limit = 50, offset: Offset = 0):
    """Newest first."""
    rows, count = store.list_clusters(engine=engine, limit=limit, offset=offset)
    return {"data": rows, "count": count}


@router.delete("/clusters/{cluster_id}", status_code=204, dependencies=WRITE,
               summary="Delete a cluster", operation_id="clusters-delete")
def delete_cluster(cluster_id: str, engine: EngineDep) -> Response:
    """Plans already computed keep their copy of the cluster."""
    if not store.delete_cluster(engine=engine, cluster_id=cluster_id):
        raise not_found("cluster", cluster_id)
    return Response(status_code=204)
