"""The pydantic-ai peer: a chat route as pydantic-ai's documentation writes one, `VercelAIAdapter.dispatch_request`
in a Starlette endpoint, with an `OpenAIChatModel` on the paced model and the benchmark's two tools.

Runs from its own virtualenv (`bench/side_by_side/requirements.txt`, pinned):

    bench/side_by_side/.venv/bin/python -m bench.side_by_side.pydantic_ai_server --provider http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.ui.vercel_ai import VercelAIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bench.side_by_side.asgi import arguments, serve
from bench.side_by_side.tools import TOOLS


def make_app(provider_url: str) -> Starlette:
    model = OpenAIChatModel("load", provider=OpenAIProvider(base_url=provider_url, api_key="load-key"))
    agent: Agent[None, str] = Agent(model, tools=TOOLS)

    async def chat(request: Request) -> Response:
        return await VercelAIAdapter.dispatch_request(request, agent=agent)

    return Starlette(routes=[Route("/api/chat", chat, methods=["POST"])])


def main() -> None:
    args = arguments(__doc__)
    serve(make_app(args.provider), args.port)


if __name__ == "__main__":
    main()
