"""What the talk says (../shared/seed, "How Inference Keeps Up with Our Insatiable Need for Tokens", Cerebras &
Gimlet Labs, AI Engineer), claim by claim, with where it says it and how close the product must come to agree.

Each ``Talk`` quotes the sentence (its start in the video and its number in the transcript), the figure as said,
and the figure as numbers: a point (``low == high``), a range (``3-10x``), or none at all, when the talk states
only a direction (then ``direction_min``: the product agrees when its figure is above it).
"""

from __future__ import annotations

from dataclasses import dataclass

#: figures that are arithmetic on published numbers (bytes, catalog ratios): the talk rounds them ("7,000 times")
ARITHMETIC_TOLERANCE = 0.15
#: figures the cost model or a plan predicts: about the width of the calibration bands (catalogs/calibration)
MODELLED_TOLERANCE = 0.25


@dataclass(frozen=True)
class Talk:
    """One claim as the talk makes it."""

    id: str
    title: str
    quote: str
    at: str  # mm:ss into the talk
    sentence: int  # the transcript's sentence number
    figure: str  # as said
    unit: str
    low: float | None = None
    high: float | None = None
    tolerance: float = MODELLED_TOLERANCE
    direction_min: float | None = None  # no number: the product agrees above this

    def test(self) -> str:
        """How the verdict is reached, in words."""
        unit = self.unit if self.unit == "x" else f" {self.unit}"
        if self.low is None:
            return f"no number: agrees above {self.direction_min:g}{unit} (the talk's direction)"
        span = f"{self.low:,.4g}" if self.low == self.high else f"{self.low:,.4g}-{self.high:,.4g}"
        return f"within ±{self.tolerance:.0%} of {span}{unit}"

    def agrees(self, product: float) -> bool:
        """The product's figure is within the tolerance of the talk's (of its range), or above ``direction_min``."""
        if self.low is None:
            return product > self.direction_min
        return self.low * (1 - self.tolerance) <= product <= self.high * (1 + self.tolerance)


TALK: dict[str, Talk] = {t.id: t for t in (
    Talk("kv-per-token", "KV cache per token (70B)",
         "the rule of thumb here for a 70 billion parameter model is that for every 3,000 tokens, you need 1 GB of "
         "additional KV cache", "05:50", 55, "1 GB per 3,000 tokens", "tokens/GB", 3000, 3000, ARITHMETIC_TOLERANCE),
    Talk("kv-128k", "KV cache of one 128k-token request",
         "128k context, you're going to save 42 gigabytes of KV cache that is needed to serve that individual request",
         "05:39", 54, "42 GB", "GB", 42, 42, ARITHMETIC_TOLERANCE),
    Talk("tp4-speedup", "Tensor parallelism over 4 GPUs",
         "you need to do this across every layer twice, which can lead to only getting 2x speed up for getting 4x the "
         "amount of compute", "03:18", 35, "~2x", "x", 2, 2),
    Talk("paged-kv", "Paged vs contiguous KV cache",
         "this allows you to serve three times more requests than not having a paged KV cache", "06:53", 65,
         "3x", "x", 3, 3),
    Talk("bandwidth", "Memory bandwidth, CS-3 over H100",
         "Cerebras has 7,000 times the bandwidth of a H100 with 21,000 terabytes per second (H100: 3.35 TB/s)",
         "12:43", 131, "7,000x", "x", 7000, 7000, ARITHMETIC_TOLERANCE),
    Talk("decode-speed", "Decode speed per user, CS-3 over H100",
         "we can serve tokens at 3,000 tokens per second versus an H100 serving it at 600 tokens per second for decode",
         "12:59", 134, "5x (3,000 vs 600 tok/s)", "x", 5, 5),
    Talk("same-footprint", "Trainium2 prefill + CS-3 decode, same footprint",
         "this will lead us to give us 5x high-speed token capacity in the same footprint", "13:26", 138,
         "5x", "x", 5, 5),
    Talk("same-power", "Heterogeneous vs homogeneous, same power",
         "we're seeing three to 10 times faster inference compared to homogeneous systems that have the same power "
         "budget", "14:11", 147, "3-10x", "x", 3, 10),
    Talk("sram-draft", "Draft on SRAM silicon: interactivity at the same throughput",
         "for that same throughput, ... you're able to get 10x the interactivity compared to if you're just running "
         "it on homogeneous machines", "16:57", 175, "10x", "x", 10, 10),
    Talk("af-disagg", "Attention/FFN disaggregation for a large MoE",
         "this one gets pretty exciting when you think about serving large models ... run the attention on the machine "
         "that has memory bandwidth, the FFN layer on the machines that can run those matrix multiplications",
         "17:09", 177, "no number", "x", direction_min=1.05),
    Talk("chunked-prefill", "Chunked prefill against long-prompt clogging",
         "while prefill is running, no other prefill or decode request can get through ... chunked prefill ... "
         "solves this problem", "08:54", 87, "no number", "x", direction_min=2.0),
)}
