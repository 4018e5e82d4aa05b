"""siliconmix: heterogeneous placement optimizer for LLM inference."""

__version__ = "0.1.0"
