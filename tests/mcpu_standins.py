"""Stand-in MCP servers for MCP-Universe tests: the real servers' names, tool names and argument shapes, fixed data.

``python tests/mcpu_standins.py SERVER`` serves SERVER over stdio; ``--http PORT`` serves it over streamable HTTP.
Nothing here touches the network: every answer is a constant keyed by the arguments (an offline simulation).
"""
from __future__ import annotations

import json
import os
import sys

from fastmcp import FastMCP

PAGES = {
    "https://www.nba.com/stats": "Bronny James: 28.1% 3PT. Markieff Morris: 30.4% 3PT.",
    "https://iclr.cc/": "ICLR 2025 main track papers ...",
}
PLACES = {"coalinga": {"name": "Coalinga", "place_id": "p-coalinga", "formatted_address": "Coalinga, CA, USA"},
          "bakersfield": {"name": "Bakersfield", "place_id": "p-bak", "formatted_address": "Bakersfield, CA, USA"}}
SEARCH = {"ollie watkins": "Ollie Watkins scored 16 goals in the 2024-25 Premier League season for Aston Villa."}


def build(name: str) -> FastMCP:
    mcp = FastMCP(name)
    if name == "playwright":
        @mcp.tool()
        def browser_navigate(url: str) -> str:
            """Navigate to a URL."""
            return json.dumps({"url": url, "loaded": url in PAGES})

        @mcp.tool()
        def browser_snapshot() -> str:
            """Capture the accessibility snapshot of the current page."""
            return " ".join(PAGES.values())

        @mcp.tool()
        def browser_close() -> str:
            """Close the page."""
            return "closed"
    elif name == "date":
        @mcp.tool()
        def get_today_date() -> str:
            """Today's date."""
            return "2025-08-20"
    elif name == "google-maps":
        @mcp.tool()
        def maps_search_places(query: str) -> str:
            """Search for places."""
            hits = [p for k, p in PLACES.items() if k in query.lower()]
            return json.dumps({"places": hits})

        @mcp.tool()
        def maps_directions(origin: str, destination: str, mode: str = "driving") -> str:
            """Directions between two places."""
            return json.dumps({"routes": [{"summary": f"{origin} to {destination} via I-5", "distance": "382 mi"}]})
    elif name == "google-search":
        @mcp.tool()
        def search(query: str) -> str:
            """Search the web."""
            return json.dumps([v for k, v in SEARCH.items() if any(w in query.lower() for w in k.split())])

        @mcp.tool()
        def env_names() -> str:
            """The names of this server's environment variables (for the sandbox test)."""
            return json.dumps(sorted(os.environ))
    elif name == "fetch":
        @mcp.tool()
        def fetch(url: str) -> str:
            """Fetch a URL."""
            return PAGES.get(url, "404")
    elif name == "yfinance":
        @mcp.tool()
        def get_historical_stock_prices(ticker: str, start_date: str, end_date: str, interval: str = "1d") -> str:
            """Historical prices."""
            return json.dumps([{"Date": start_date, "Close": 100.0}, {"Date": end_date, "Close": 164.0}])
    elif name == "calculator":
        @mcp.tool()
        def calculate(expression: str) -> str:
            """Evaluate an arithmetic expression."""
            allowed = set("0123456789.+-*/() ")
            return str(eval(expression, {}, {})) if set(expression) <= allowed else "error"  # noqa: S307
    elif name == "weather":
        @mcp.tool()
        def get_forecast(latitude: float, longitude: float) -> str:
            """A forecast."""
            return "Tonight: rain likely."
    else:
        raise SystemExit(f"no stand-in for {name}")
    return mcp


if __name__ == "__main__":
    server = build(sys.argv[1])
    if len(sys.argv) > 3 and sys.argv[2] == "--http":
        server.run(transport="http", host="127.0.0.1", port=int(sys.argv[3]), show_banner=False)
    else:
        server.run(show_banner=False)
