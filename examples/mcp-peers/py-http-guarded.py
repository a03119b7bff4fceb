"""A client on the official Python SDK (PyPI `mcp`) that connects to an MCP
endpoint over Streamable HTTP with a bearer token (from `PINFOLD_TOKEN`),
lists its tools (every page) and makes the calls it is given, in order.
Pinfold's tests point it at a guard endpoint. Prints one JSON object:

    {"tools": [{name, description, annotations}],
     "calls": [{"result": CallToolResult} | {"error": {code, message, data}}]}

    python py-http-guarded.py URL '[{"name": "echo", "arguments": {"message": "hi"}}]'
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, types
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.exceptions import MCPError


async def main() -> None:
    if len(sys.argv) != 3:
        print("usage: py-http-guarded.py URL CALLS_JSON", file=sys.stderr)
        sys.exit(2)
    url, calls = sys.argv[1], json.loads(sys.argv[2])
    headers = {"Authorization": f"Bearer {os.environ['PINFOLD_TOKEN']}"}
    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = []
                cursor = None
                while True:
                    params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    page = await session.list_tools(params=params)
                    for t in page.tools:
                        tools.append({
                            "name": t.name,
                            "description": t.description,
                            "annotations": t.annotations.model_dump(by_alias=True, exclude_none=True) if t.annotations else None,
                        })
                    cursor = page.next_cursor
                    if not cursor:
                        break
                results = []
                for c in calls:
                    try:
                        r = await session.call_tool(c["name"], c.get("arguments", {}))
                        results.append({"result": r.model_dump(by_alias=True, exclude_none=True, mode="json")})
                    except MCPError as e:
                        results.append({"error": {"code": e.error.code, "message": e.error.message, "data": e.error.data}})
    print(json.dumps({"tools": tools, "calls": results}))


asyncio.run(main())
