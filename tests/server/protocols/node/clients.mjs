// The protocols' own client code, driven by the server tests (tests/server/protocols/clients.py).
//
// Reads one JSON command per line on stdin and answers each with one JSON line on stdout
// ({"reply": id, ...}); commands run concurrently, so a test can start a request and act while it
// streams. Progress is reported as event lines ({"event": "chunk" | "done" | "error", ...}).
//
// Vercel AI SDK: a chat object is `AbstractChat` from `ai` (what `useChat` wraps) with a plain state,
// and `DefaultChatTransport`, which parses every chunk with the package's own schema. The transport's
// fetch is wrapped to keep a copy of every chunk, each checked again against the chunk schemas of `ai`
// 7 (the client in use) and `ai` 6 (older clients must read the stream too).
// AG-UI: `HttpAgent` from `@ag-ui/client`, which verifies the event order and builds the messages.

import readline from 'node:readline';
import {
  AbstractChat,
  DefaultChatTransport,
  asSchema,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  uiMessageChunkSchema,
  validateUIMessages,
} from 'ai';
import { asSchema as asSchema6, uiMessageChunkSchema as uiMessageChunkSchema6 } from 'ai6';
import { HttpAgent } from '@ag-ui/client';

const schema7 = asSchema(uiMessageChunkSchema);
const schema6 = asSchema6(uiMessageChunkSchema6);

const print = value => process.stdout.write(`${JSON.stringify(value)}\n`);

class PlainState {
  constructor(messages) {
    this.status = 'ready';
    this.error = undefined;
    this.messages = messages;
  }
  pushMessage(message) { this.messages = this.messages.concat(message); }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(index, message) {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  }
  snapshot(value) { return structuredClone(value); }
}

class Chat extends AbstractChat {
  constructor({ messages = [], ...init }) {
    super({ ...init, state: new PlainState(messages) });
  }
}

const chats = new Map();

// A copy of every chunk of a response, checked against both schemas, reported as it arrives.
async function watch(name, record, body) {
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let buffer = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const frame = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        for (const line of frame.split('\n')) {
          if (!line.startsWith('data: ')) continue;
          const data = line.slice(6);
          if (data === '[DONE]') {
            record.done += 1;
            print({ event: 'done', name });
            continue;
          }
          const chunk = JSON.parse(data);
          record.chunks.push(chunk);
          if (!(await schema7.validate(chunk)).success) record.rejected7.push(chunk);
          if (!(await schema6.validate(chunk)).success) record.rejected6.push(chunk);
          print({ event: 'chunk', name, chunk });
        }
      }
    }
  } catch {
    // the request was aborted (stop): the client's own branch reports that
  }
}

function recordingFetch(name, record) {
  return async (url, init) => {
    const response = await fetch(url, init);
    record.responses.push({
      method: init?.method ?? 'GET',
      url: String(url),
      status: response.status,
      stream: response.headers.get('x-vercel-ai-ui-message-stream'),
    });
    if (!response.body) return response;
    const [mine, theirs] = response.body.tee();
    void watch(name, record, mine);
    return new Response(theirs, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

function snapshot(name) {
  const { chat, record } = chats.get(name);
  return {
    status: chat.status,
    error: chat.error ? String(chat.error.message ?? chat.error) : null,
    messages: chat.messages,
    chunks: record.chunks,
    rejected7: record.rejected7,
    rejected6: record.rejected6,
    errors: record.errors,
    finishes: record.finishes,
    responses: record.responses,
    done: record.done,
  };
}

async function settled(chat) {
  // A request sent by `sendAutomaticallyWhen` starts without being awaited: wait for it to begin and end.
  const started = Date.now();
  while (chat.status === 'ready' && Date.now() - started < 2000) await new Promise(r => setTimeout(r, 5));
  while (chat.status === 'submitted' || chat.status === 'streaming') await new Promise(r => setTimeout(r, 5));
}

const commands = {
  chat({ name, url, token, chatId, messages, lastOnly, automatic }) {
    const record = { chunks: [], rejected7: [], rejected6: [], errors: [], finishes: [], responses: [], done: 0 };
    const transport = new DefaultChatTransport({
      api: `${url}/api/chat`,
      headers: { Authorization: `Bearer ${token}` },
      fetch: recordingFetch(name, record),
      ...(lastOnly
        ? { prepareSendMessagesRequest: ({ id, messages: all }) => ({ body: { id, message: all[all.length - 1] } }) }
        : {}),
    });
    const chat = new Chat({
      id: chatId,
      messages: messages ?? [],
      transport,
      onError: error => {
        record.errors.push(String(error?.message ?? error));
        print({ event: 'error', name, message: String(error?.message ?? error) });
      },
      onFinish: ({ isAbort, isError, isDisconnect, finishReason, message }) => {
        record.finishes.push({ isAbort, isError, isDisconnect, finishReason: finishReason ?? null, messageId: message.id });
      },
      ...(automatic ? { sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses } : {}),
    });
    chats.set(name, { chat, record, automatic: Boolean(automatic) });
    return { id: chat.id };
  },

  // `files`: FileUIPart objects ({ type: 'file', mediaType, filename, url }), as sendMessage({ files }) takes them.
  // `body`: extra fields of the request body (`sendMessage(message, { body })`), a model choice say.
  async send({ name, text, files, body }) {
    await chats.get(name).chat.sendMessage(files ? { text, files } : { text }, body ? { body } : undefined);
    return snapshot(name);
  },

  // `regenerate()` (the last answer) or `regenerate({ messageId })`.
  async regenerate({ name, messageId }) {
    await chats.get(name).chat.regenerate(messageId ? { messageId } : undefined);
    return snapshot(name);
  },

  // Edit an earlier user message: `sendMessage({ text, messageId })`, as an editing UI does.
  async edit({ name, text, messageId }) {
    await chats.get(name).chat.sendMessage({ text, messageId });
    return snapshot(name);
  },

  // Answer every approval the last assistant message asks for, in order, then send the answers.
  async approve({ name, decisions }) {
    const { chat, automatic } = chats.get(name);
    const last = chat.messages[chat.messages.length - 1];
    const asked = last.parts.filter(part => part.state === 'approval-requested');
    if (asked.length !== decisions.length) throw new Error(`${asked.length} approvals asked, ${decisions.length} given`);
    for (const [index, part] of asked.entries()) {
      const { approved, reason } = decisions[index];
      await chat.addToolApprovalResponse({ id: part.approval.id, approved, ...(reason ? { reason } : {}) });
    }
    if (automatic) await settled(chat);
    else await chat.sendMessage();
    return snapshot(name);
  },

  async resume({ name }) {
    await chats.get(name).chat.resumeStream();
    return snapshot(name);
  },

  async stop({ name }) {
    await chats.get(name).chat.stop();
    return snapshot(name);
  },

  state({ name }) {
    return snapshot(name);
  },

  // The stored chat as UI messages, checked with the package's own message validator.
  async history({ url, token, chatId }) {
    const response = await fetch(`${url}/api/chat/${encodeURIComponent(chatId)}/messages`, {
      headers: { Authorization: `Bearer ${token}` },
    });
    const { messages } = await response.json();
    let invalid = null;
    try {
      await validateUIMessages({ messages });
    } catch (error) {
      invalid = String(error?.message ?? error);
    }
    return { status: response.status, messages, invalid };
  },

  // One AG-UI run with HttpAgent: every event it applied, its messages, and how the run ended.
  async agui({ url, token, threadId, messages, text, messageId, runId, resume, forwardedProps }) {
    const agent = new HttpAgent({
      url: `${url}/api/agui`,
      headers: { Authorization: `Bearer ${token}` },
      threadId,
      initialMessages: messages ?? [],
    });
    if (text) agent.addMessage({ id: messageId, role: 'user', content: text });
    const events = [];
    let failure = null;
    let finished = null;
    try {
      await agent.runAgent({ runId, ...(resume ? { resume } : {}), ...(forwardedProps ? { forwardedProps } : {}) }, {
        onEvent: ({ event }) => { events.push(event); },
        onRunFinishedEvent: ({ outcome, interrupts }) => { finished = { outcome, interrupts: interrupts ?? null }; },
        onRunFailed: ({ error }) => { failure = String(error?.message ?? error); },
      });
    } catch (error) {
      failure = String(error?.message ?? error);
    }
    return { events, messages: agent.messages, finished, failure, pendingInterrupts: agent.pendingInterrupts ?? [] };
  },
};

const lines = readline.createInterface({ input: process.stdin });
lines.on('line', async line => {
  if (!line.trim()) return;
  const command = JSON.parse(line);
  try {
    const result = await commands[command.cmd](command);
    print({ reply: command.id, ok: true, result });
  } catch (error) {
    print({ reply: command.id, ok: false, error: String(error?.stack ?? error) });
  }
});
lines.on('close', () => process.exit(0));
print({ event: 'ready' });
