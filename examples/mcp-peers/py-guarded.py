"""A client on the official Python SDK (PyPI `mcp`) that starts an MCP
server by command over stdio, as desktop clients do, lists its tools
(every page) and makes the calls it is given, in order. Pinfold's tests
start `pinfold guard ... -- SERVER` with it. Prints one JSON object:

    {"tools": [{name, description, annotations}],
     "calls": [{"result": CallToolResult} | {"error": {code, message, data}}]}

    python py-guarded.py '[{"name": "echo", "arguments": {"message": "hi"}}]' CMD [ARGS...]
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError


async def main() -> None:
    if len(sys.argv) < 3:
        print("usage: py-guarded.py CALLS_JSON CMD [ARGS...]", file=sys.stderr)
        sys.exit(2)
    calls = json.loads(sys.argv[1])
    params = StdioServerParameters(command=sys.argv[2], args=sys.argv[3:], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
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
