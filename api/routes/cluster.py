"""/v1/cluster: this node's id, the partitions' owners and the nodes (on a single node, one
node that owns every partition, epoch 0)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from api.docs import responses
from api.responses import MsgspecJSONResponse
from api.routes.deps import service_of

router = APIRouter(prefix="/v1/cluster", tags=["cluster"])


@router.get(
    "",
    summary="Partitions, their owners and the nodes",
    description=(
        "Answers on every node. A partition with no owner (its lease expired and no node "
        "took it yet) has `node_id` null. A single node answers as one node (`node_id` "
        'from `cluster.node_id`, else "local") owning every partition at epoch 0.'
    ),
    response_class=MsgspecJSONResponse,
    responses=responses({200: ("the cluster as this node sees it", "ClusterView")}),
)
async def get_cluster(request: Request) -> Response:
    return MsgspecJSONResponse(await service_of(request).cluster_view())
