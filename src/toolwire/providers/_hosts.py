"""The provider table. Each entry is configuration of a wire protocol; none brings a parser of its own.

Option keys understood by the OpenAI Chat protocol:
- `max_tokens_field`: `max_completion_tokens` (OpenAI) or `max_tokens` (most compatible hosts);
- `stream_options`: whether the host accepts `stream_options: {"include_usage": true}`.
"""

from __future__ import annotations

from . import Capabilities, Provider

_COMPAT = {"max_tokens_field": "max_tokens", "stream_options": True}

_ENTRIES = [
    Provider(
        name="openai",
        protocol="openai-chat",
        base_url="https://api.openai.com/v1",
        api_key_env=("OPENAI_API_KEY",),
        base_url_env=("OPENAI_BASE_URL",),
        options={"max_tokens_field": "max_completion_tokens", "stream_options": True},
        capabilities=Capabilities(thinking=False),
        description="OpenAI Chat Completions",
    ),
    Provider(
        name="openai-responses",
        protocol="openai-responses",
        base_url="https://api.openai.com/v1",
        api_key_env=("OPENAI_API_KEY",),
        base_url_env=("OPENAI_BASE_URL",),
        capabilities=Capabilities(thinking=True),
        description="OpenAI Responses API",
    ),
    Provider(
        name="openrouter",
        protocol="openai-chat",
        base_url="https://openrouter.ai/api/v1",
        api_key_env=("OPENROUTER_API_KEY",),
        base_url_env=("OPENROUTER_BASE_URL",),
        options=_COMPAT,
        capabilities=Capabilities(thinking=True),
        description="OpenRouter (OpenAI-compatible)",
    ),
    Provider(
        name="groq",
        protocol="openai-chat",
        base_url="https://api.groq.com/openai/v1",
        api_key_env=("GROQ_API_KEY",),
        base_url_env=("GROQ_BASE_URL",),
        options=_COMPAT,
        capabilities=Capabilities(thinking=True),
        description="Groq (OpenAI-compatible)",
    ),
    Provider(
        name="together",
        protocol="openai-chat",
        base_url="https://api.together.xyz/v1",
        api_key_env=("TOGETHER_API_KEY",),
        base_url_env=("TOGETHER_BASE_URL",),
        options=_COMPAT,
        capabilities=Capabilities(thinking=True),
        description="Together AI (OpenAI-compatible)",
    ),
    Provider(
        name="fireworks",
        protocol="openai-chat",
        base_url="https://api.fireworks.ai/inference/v1",
        api_key_env=("FIREWORKS_API_KEY",),
        base_url_env=("FIREWORKS_BASE_URL",),
        options=_COMPAT,
        capabilities=Capabilities(thinking=True),
        description="Fireworks AI (OpenAI-compatible)",
    ),
    Provider(
        name="nvidia",
        protocol="openai-chat",
        base_url="https://integrate.api.nvidia.com/v1",
        api_key_env=("NVIDIA_API_KEY",),
        base_url_env=("NVIDIA_BASE_URL",),
        options=_COMPAT,
        capabilities=Capabilities(thinking=True),
        description="NVIDIA NIM (OpenAI-compatible)",
    ),
    Provider(
        name="deepseek",
        protocol="openai-chat",
        base_url="https://api.deepseek.com/v1",
        api_key_env=("DEEPSEEK_API_KEY",),
        base_url_env=("DEEPSEEK_BASE_URL",),
        options=_COMPAT,
        capabilities=Capabilities(thinking=True, structured_output="json_mode"),
        description="DeepSeek (OpenAI-compatible)",
    ),
    Provider(
        name="xai",
        protocol="openai-chat",
        base_url="https://api.x.ai/v1",
        api_key_env=("XAI_API_KEY",),
        base_url_env=("XAI_BASE_URL",),
        options=_COMPAT,
        capabilities=Capabilities(thinking=True),
        description="xAI Grok (OpenAI-compatible)",
    ),
    Provider(
        name="openai-compatible",
        protocol="openai-chat",
        base_url=None,
        api_key_env=("OPENAI_COMPATIBLE_API_KEY",),
        base_url_env=("OPENAI_COMPATIBLE_BASE_URL",),
        api_key_required=False,
        options=_COMPAT,
        capabilities=Capabilities(thinking=True),
        description="Any OpenAI-compatible server (vLLM, LM Studio, llama.cpp...): pass base_url",
    ),
    Provider(
        name="anthropic",
        protocol="anthropic",
        base_url="https://api.anthropic.com",
        api_key_env=("ANTHROPIC_API_KEY",),
        base_url_env=("ANTHROPIC_BASE_URL",),
        capabilities=Capabilities(thinking=True, structured_output="tool"),
        description="Anthropic Messages",
    ),
    Provider(
        name="gemini",
        protocol="gemini",
        base_url="https://generativelanguage.googleapis.com/v1beta",
        api_key_env=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        base_url_env=("GEMINI_BASE_URL",),
        capabilities=Capabilities(native_ids=False, thinking=True, structured_output="response_schema"),
        description="Google Gemini API",
    ),
    Provider(
        name="ollama",
        protocol="ollama",
        base_url="http://localhost:11434",
        api_key_env=("OLLAMA_API_KEY",),
        base_url_env=("OLLAMA_HOST",),
        api_key_required=False,
        options={"base_url_scheme_default": True},
        capabilities=Capabilities(native_ids=False, thinking=True, structured_output="format",
                                  streaming_format="NDJSON"),
        description="Ollama native /api/chat",
    ),
    Provider(
        name="mistral",
        protocol="mistral",
        base_url="https://api.mistral.ai/v1",
        api_key_env=("MISTRAL_API_KEY",),
        base_url_env=("MISTRAL_BASE_URL",),
        capabilities=Capabilities(thinking=True, structured_output="json_schema"),
        description="Mistral chat completions",
    ),
    Provider(
        name="cohere",
        protocol="cohere",
        base_url="https://api.cohere.com",
        api_key_env=("CO_API_KEY", "COHERE_API_KEY"),
        base_url_env=("CO_API_URL",),
        capabilities=Capabilities(thinking=True, structured_output="json_schema"),
        description="Cohere v2 chat",
    ),
]

PROVIDERS: dict[str, Provider] = {p.name: p for p in _ENTRIES}

ALIASES: dict[str, str] = {"google": "gemini", "google-gla": "gemini", "claude": "anthropic"}
