package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The official TypeScript MCP SDK, pinned; npm fetches it once into the
// user cache.
const mcpTypeScriptSDK = "@modelcontextprotocol/sdk@1.32.2"

// mcpClientScript connects the TypeScript SDK's client to url with key,
// lists the tools and calls echo_args, and prints what it got as JSON.
const mcpClientScript = `import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
const [url, key] = process.argv.slice(2);
const client = new Client({ name: "flowd-ts-test", version: "1" });
await client.connect(new StreamableHTTPClientTransport(new URL(url),
  { requestInit: { headers: { Authorization: "Bearer " + key } } }));
const tools = await client.listTools();
const res = await client.callTool({ name: "echo_args", arguments: { x: 2 } });
console.log(JSON.stringify({ tools: tools.tools.map((t) => t.name), res }));
await client.close();
`

// TestMCPTypeScriptClient connects the official TypeScript SDK's client
// (StreamableHTTPClientTransport, unchanged but for the Authorization
// header) to flowd's /mcp: it lists the tool and calls it. It needs node
// and npm, and npm must reach its registry (or its cache) the first time;
// without them the test is skipped, saying why.
func TestMCPTypeScriptClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd and node")
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed: the TypeScript MCP client needs node and npm")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Skipf("no user cache directory for the npm package: %v", err)
	}
	tools := filepath.Join(cache, "flowservice-mcp-sdk")
	if _, err := os.Stat(filepath.Join(tools, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		if err := os.MkdirAll(tools, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tools, "package.json"), []byte(`{"name":"flowservice-mcp-sdk","private":true}`), 0o644); err != nil {
			t.Fatal(err)
		}
		install := exec.Command("npm", "install", "--no-audit", "--no-fund", "--prefer-offline", mcpTypeScriptSDK)
		install.Dir = tools
		if out, err := install.CombinedOutput(); err != nil {
			t.Skipf("npm could not install %s (offline?): %v\n%s", mcpTypeScriptSDK, err, out)
		}
	}
	// Node resolves the package from the script's own directory.
	script := filepath.Join(tools, "mcp-client-test.mjs")
	if err := os.WriteFile(script, []byte(mcpClientScript), 0o644); err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	createEnabled(t, p, key, `{"name": "Echo args", "engine": "FLOW_BUILDER", "description": "Answers what it was given.",
		"trigger": {"type": "WEBHOOK", "inputSchema": {"type": "object", "properties": {"x": {"type": "integer"}}}},
		"steps": [{"name": "answer", "type": "RESPOND", "body": {"args": "{{ trigger.body }}", "caller": "{{ trigger.caller }}"}}]}`)

	out, err := exec.Command("node", script, p.base+"/mcp", key).CombinedOutput()
	if err != nil {
		t.Fatalf("the TypeScript client failed: %v\n%s", err, out)
	}
	var got struct {
		Tools []string
		Res   struct {
			IsError           bool
			StructuredContent json.RawMessage
			Content           []struct{ Type, Text string }
		}
	}
	line := strings.TrimSpace(string(out))
	if i := strings.LastIndex(line, "\n"); i >= 0 {
		line = line[i+1:]
	}
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("client output %s: %v", out, err)
	}
	if !slices.Equal(got.Tools, []string{"echo_args"}) || got.Res.IsError ||
		string(got.Res.StructuredContent) != `{"args":{"x":2},"caller":{"mcp":true}}` ||
		len(got.Res.Content) != 1 || got.Res.Content[0].Type != "text" {
		t.Errorf("TypeScript client got %s", out)
	}
}
