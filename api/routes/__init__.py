"""Routers of the service. A new resource is one module here and one line in a list below.

``V1_ROUTERS`` sit behind the API-key check when SILICONMIX_API_KEYS is set; ``OPEN_ROUTERS`` never do.
"""

from api.routes import catalog, deploy, estimate, exports, health, plans, simulations, studies

V1_ROUTERS = [
    plans.router,
    simulations.router,
    estimate.router,
    catalog.router,
    studies.router,
    exports.router,
    deploy.router,
]

OPEN_ROUTERS = [
    health.router,
]

#: OpenAPI tag descriptions, in the order the docs show them
TAGS = [
    {"name": "plans", "description": "Plan a fleet for a workload; list and fetch earlier plans."},
    {"name": "simulations", "description": "Replay a stored plan request by request (background jobs): its simulated "
                                           "latencies against the SLOs and the plan's predictions."},
    {"name": "estimate", "description": "The cost model for one model on one device configuration."},
    {"name": "catalog", "description": "Accelerators and model architectures the planner knows, with sources."},
    {"name": "studies", "description": "What-if studies as background jobs: submit, follow, fetch results, cancel."},
    {"name": "exports", "description": "Procurement downloads: a plan's workbook or BoM CSV, a study's workbook or CSV."},
    {"name": "health", "description": "Liveness and readiness probes (never need a key)."},
]
