"""The MCP server (the official ``mcp`` SDK) and the API keys on its HTTP transport."""
