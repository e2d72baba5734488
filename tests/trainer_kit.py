"""What the trainer-consumer tests share: a tiny random-initialised Qwen3 model and a tokenizer built offline.

Nothing is downloaded. The tokenizer is a byte-level BPE trained in a moment on the sample environments' own text
(every string encodes; chat markers and tool-call tags are single tokens, special or not as in Qwen3's) and carries
TRL's shipped Qwen3 chat template (``trl/chat_templates/qwen3.jinja``), so TRL recognises it as Qwen3 and parses
tool calls the way it does for the real model. The model is a Qwen3 configuration with two layers of width 32.

The builders need the CPU trainer extra (``make trainers``); a test module calls ``requires_trainers`` first, which
skips it, saying which library is missing, when the extra is not installed (a ``make setup``-only environment).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXTRA = "the CPU trainer extra (make trainers: torch, TRL, transformers, datasets, verl)"
# as in Qwen3's tokenizer: the chat markers are special tokens (dropped by ``skip_special_tokens``), the tool-call,
# tool-response and thinking tags added tokens that are not special (a decoded turn keeps them)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TAGS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]


def requires_trainers(*modules: str) -> None:
    """Skip the calling module, with the reason, when one of ``modules`` (default: the whole extra) is missing."""
    for name in modules or ("torch", "transformers", "datasets", "trl", "verl"):
        if importlib.util.find_spec(name) is None:
            pytest.skip(f"{name} is not installed: {EXTRA} is not set up", allow_module_level=True)


def _corpus() -> list[str]:
    """Text the tokenizer learns its merges from: the sample environments' files and awm's prompts."""
    texts = [p.read_text() for p in sorted((ROOT / "sample_envs").glob("*.jsonl"))]
    from awm_engine.agent.rollout import AgentConfig
    from awm_engine.train.tasks import TEMPLATE_TOOLS_SYSTEM_PROMPT
    texts += [AgentConfig().system_prompt_text, AgentConfig(mode="native").system_prompt_text,
              TEMPLATE_TOOLS_SYSTEM_PROMPT]
    return [line for text in texts for line in text.splitlines() if line.strip()]


def build_tokenizer(vocab_size: int = 4096):
    """A ``PreTrainedTokenizerFast`` with TRL's Qwen3 chat template, trained offline."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen3_chat_template

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(_corpus(), trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    bpe.add_tokens([AddedToken(tag, special=False, normalized=False) for tag in TAGS])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        bos_token=None, unk_token=None)
    tokenizer.chat_template = qwen3_chat_template
    return tokenizer


def build_model(tokenizer, seed: int = 0):
    """A random-initialised two-layer Qwen3 causal LM over ``tokenizer``'s vocabulary (float32, CPU)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=32768,
                         tie_word_embeddings=True, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=None)
    return Qwen3ForCausalLM(config).to(torch.float32)


def save_model_dir(path: Path, seed: int = 0) -> Path:
    """The tiny model and its tokenizer saved as a local Hugging Face model folder (what a trainer's ``model.path``
    names)."""
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, seed)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    model.generation_config.save_pretrained(path)
    return path
