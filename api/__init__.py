"""siliconmix REST service: a thin FastAPI shell around ``planner`` (which never imports it).

``api.main.create_app(settings)`` builds the app; ``siliconmix serve`` runs it under uvicorn.
"""
