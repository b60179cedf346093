"""A real MCP client (the official Python SDK, PyPI `mcp` 2.x) that drives `askdb mcp`.

tests/mcp.rs runs it; nothing here judges the answers. It starts the server command given
after `--` over stdio (stdio_client + ClientSession), initializes, lists the tools, then
makes every call in one session, so a few hundred calls stay fast:

  - each line of --calls FILE: {"id": ..., "tool": ..., "arguments": {...}};
  - with --corpus FILE --dialect D, one run_query per corpus statement that applies to D
    (dialect "any" or D), with the statement's id.

It prints one JSON object per line on stdout: first the session (protocol version, server
info, instructions, tools with their input schemas), then one verdict per call (isError,
structured content, text), then {"kind": "done"}. The server's stderr passes through.
"""

import argparse
import json
import sys

import anyio
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client


def dump(model):
    """A pydantic model (or None) as the JSON the wire carried, camelCase keys."""
    if model is None:
        return None
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def emit(record):
    print(json.dumps(record, ensure_ascii=False), flush=True)


def load_calls(args):
    calls = []
    if args.calls:
        with open(args.calls, encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    calls.append(json.loads(line))
    if args.corpus:
        with open(args.corpus, encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    continue
                entry = json.loads(line)
                if entry["dialect"] in ("any", args.dialect):
                    calls.append(
                        {
                            "id": entry["id"],
                            "tool": "run_query",
                            "arguments": {"sql": entry["sql"]},
                        }
                    )
    return calls


async def run(args, server):
    calls = load_calls(args)
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools = await session.list_tools()
            emit(
                {
                    "kind": "session",
                    "sdk": "python mcp",
                    "protocol_version": init.protocol_version,
                    "server": dump(init.server_info),
                    "instructions": init.instructions,
                    "tools": [dump(tool) for tool in tools.tools],
                }
            )
            for call in calls:
                record = {
                    "kind": "call",
                    "id": call.get("id"),
                    "tool": call["tool"],
                    "arguments": call.get("arguments", {}),
                }
                try:
                    result = await session.call_tool(call["tool"], call.get("arguments", {}))
                except MCPError as error:
                    # A protocol error (e.g. invalid arguments): recorded, not fatal.
                    record["protocol_error"] = str(error)
                else:
                    record["is_error"] = bool(result.is_error)
                    record["structured"] = result.structured_content
                    record["text"] = [
                        block.text for block in result.content if getattr(block, "type", None) == "text"
                    ]
                emit(record)
    emit({"kind": "done", "calls": len(calls)})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", help="JSON lines of {id, tool, arguments}")
    parser.add_argument("--corpus", help="a JSONL SQL corpus (id, dialect, sql)")
    parser.add_argument("--dialect", choices=["sqlite", "postgres"], help="which corpus entries apply")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- server command and arguments")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the server command after --")
    if args.corpus and not args.dialect:
        parser.error("--corpus needs --dialect")
    env = dict(item.split("=", 1) for item in args.env)
    server = StdioServerParameters(command=command[0], args=command[1:], env=env)
    anyio.run(run, args, server)


if __name__ == "__main__":
    sys.exit(main())
