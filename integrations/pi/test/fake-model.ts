/**
 * A scripted model behind an OpenAI-compatible `POST /v1/chat/completions` (streamed), on loopback.
 *
 * First request: the model calls the `ask` tool with `toolArguments`. Once a tool result is in the
 * conversation, it answers with one text message quoting it: `The human answered. <tool result>`.
 */

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";

export interface FakeModel {
  baseUrl: string;
  /** The request bodies received, parsed. */
  requests: any[];
  close(): Promise<void>;
}

function chunk(delta: Record<string, unknown>, finish: string | null = null): string {
  const body = {
    id: "chatcmpl-fake",
    object: "chat.completion.chunk",
    created: 0,
    model: "scripted",
    choices: [{ index: 0, delta, finish_reason: finish }],
  };
  return `data: ${JSON.stringify(body)}\n\n`;
}

function toolResultText(message: any): string {
  if (typeof message.content === "string") return message.content;
  return (message.content ?? []).map((part: any) => part.text ?? "").join("");
}

export async function startFakeModel(toolArguments: unknown): Promise<FakeModel> {
  const requests: any[] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let raw = "";
    req.on("data", (c: Buffer) => (raw += c.toString()));
    req.on("end", () => {
      if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) {
        res.writeHead(404, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: `no ${req.method} ${req.url}` } }));
        return;
      }
      const body = JSON.parse(raw);
      requests.push(body);
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      const toolMessage = [...(body.messages ?? [])].reverse().find((m: any) => m.role === "tool");
      if (toolMessage) {
        res.write(chunk({ role: "assistant", content: "The human answered. " }));
        res.write(chunk({ content: toolResultText(toolMessage) }));
        res.write(chunk({}, "stop"));
      } else {
        res.write(
          chunk({
            role: "assistant",
            tool_calls: [
              {
                index: 0,
                id: "call_ask_1",
                type: "function",
                function: { name: "ask", arguments: JSON.stringify(toolArguments) },
              },
            ],
          }),
        );
        res.write(chunk({}, "tool_calls"));
      }
      res.end("data: [DONE]\n\n");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
