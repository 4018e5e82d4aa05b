"""The roofline cost model: small pure numpy functions, base SI units (bytes, FLOP/s, seconds).

Every function accepts scalars or broadcastable numpy arrays, so the same formula prices one
configuration or a whole grid (devices x parallelism x batch x context) in one call.
"""
