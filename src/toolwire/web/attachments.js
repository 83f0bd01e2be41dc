// Files in the page: attaching them to a message (a button, drag and drop, paste), their previews with a
// remove button, their upload with progress, and showing the files of messages and tool results.
//
// Safety: an image is shown only from the server's own download route (`api/files/{id}`), fetched with the
// token and shown through a `blob:` URL (the page's policy allows images from 'self' and blob: only). A file
// that names a URL (written by a model or a tool) is never loaded: it stays a link that a person may follow.

let source = null; // the Api that file views fetch with (set when the person signs in)
const loaded = new Map(); // file id -> Promise of a blob: URL (each file is fetched once per page)

/** Use `api` (its token) to fetch the files shown from now on. */
export function setFileSource(api) {
  source = api;
  for (const url of loaded.values()) url.then((u) => URL.revokeObjectURL(u), () => {});
  loaded.clear();
}

function el(doc, tag, className = null, text = null) {
  const node = doc.createElement(tag);
  if (className !== null) node.className = className;
  if (text !== null) node.textContent = text;
  return node;
}

export function formatSize(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} kB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

const INLINE = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);

// The one place an image's source is set: only a blob: URL the page made itself (from bytes the server's download
// route answered, or from a file the person picked), never a URL from a message or a tool.
function showBlob(img, url) {
  if (!url.startsWith("blob:")) throw new Error("Images are shown from blob: URLs only.");
  img.src = url;
}

function blobUrl(fileId) {
  if (!loaded.has(fileId)) {
    const promise = source.request("GET", `api/files/${encodeURIComponent(fileId)}`, { accept: "*/*" })
      .then((response) => response.blob())
      .then((blob) => URL.createObjectURL(blob));
    promise.catch(() => loaded.delete(fileId));
    loaded.set(fileId, promise);
  }
  return loaded.get(fileId);
}

/** The views of the file parts among `parts` (a stored message's or a tool result's): images shown, other
 *  stored files as download chips, files by URL as links. */
export function fileViews(doc, parts) {
  const files = (parts ?? []).filter((p) => p && p.type === "file");
  if (files.length === 0 || source === null) return [];
  return files.map((part) => {
    const name = part.name || part.media_type || "file";
    if (part.blob_id && INLINE.has(part.media_type)) {
      const figure = el(doc, "figure", "file-image");
      const img = el(doc, "img");
      img.alt = name;
      img.dataset.fileId = part.blob_id;
      figure.append(img, el(doc, "figcaption", null, name));
      blobUrl(part.blob_id).then((url) => showBlob(img, url), () => { figure.classList.add("failed"); });
      return figure;
    }
    if (part.blob_id) {
      const chip = el(doc, "button", "file-chip", `${name} · download`);
      chip.type = "button";
      chip.dataset.fileId = part.blob_id;
      chip.addEventListener("click", async () => {
        const link = el(doc, "a");
        link.href = await blobUrl(part.blob_id);
        link.download = name;
        link.click();
      });
      return chip;
    }
    if (part.url && /^https?:/i.test(part.url)) {
      const link = el(doc, "a", "file-link", name);
      link.href = part.url;
      link.rel = "noopener noreferrer";
      link.target = "_blank";
      return link;
    }
    return el(doc, "span", "file-chip", name);
  });
}

/** Upload `file` to a chat with progress (fetch cannot report an upload's progress: XMLHttpRequest can). */
function upload(api, chatId, file, onProgress) {
  return new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open("POST", api.url(`api/chats/${encodeURIComponent(chatId)}/files`, { name: file.name || "pasted" }));
    if (api.token) request.setRequestHeader("Authorization", `Bearer ${api.token}`);
    request.setRequestHeader("Content-Type", file.type || "application/octet-stream");
    request.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    });
    request.addEventListener("load", () => {
      let body = null;
      try { body = JSON.parse(request.responseText); } catch { /* not JSON */ }
      if (request.status === 201 && body) resolve(body);
      else reject(new Error(body?.error?.message ?? `The upload of ${file.name} failed (${request.status}).`));
    });
    request.addEventListener("error", () => reject(new Error(`The upload of ${file.name} did not reach the server.`)));
    request.send(file);
  });
}

/** The composer's attachments: what the person picked, dropped or pasted, waiting to be sent. */
export class Attachments {
  constructor(doc, composer, messageBox) {
    this.doc = doc;
    this.items = [];
    this.input = el(doc, "input");
    this.input.type = "file";
    this.input.multiple = true;
    this.input.hidden = true;
    this.input.id = "attach-input";
    this.input.setAttribute("aria-label", "Files to attach");
    this.button = el(doc, "button", "secondary attach", "Attach");
    this.button.type = "button";
    this.button.id = "attach";
    this.button.setAttribute("aria-label", "Attach files");
    this.list = el(doc, "ul", "attachments");
    this.list.setAttribute("aria-label", "Attachments");
    this.list.hidden = true;
    composer.prepend(this.list);
    composer.insertBefore(this.button, messageBox.nextSibling);
    composer.append(this.input);
    this.button.addEventListener("click", () => this.input.click());
    this.input.addEventListener("change", () => {
      this.add(this.input.files);
      this.input.value = "";
    });
    composer.addEventListener("dragover", (event) => {
      if (event.dataTransfer?.types?.includes("Files")) {
        event.preventDefault();
        composer.classList.add("dropping");
      }
    });
    composer.addEventListener("dragleave", () => composer.classList.remove("dropping"));
    composer.addEventListener("drop", (event) => {
      composer.classList.remove("dropping");
      if (event.dataTransfer?.files?.length) {
        event.preventDefault();
        this.add(event.dataTransfer.files);
      }
    });
    messageBox.addEventListener("paste", (event) => {
      const files = event.clipboardData?.files;
      if (files && files.length > 0) {
        event.preventDefault();
        this.add(files);
      }
    });
  }

  add(files) {
    for (const file of files ?? []) {
      const preview = file.type.startsWith("image/") ? URL.createObjectURL(file) : null;
      this.items.push({ file, preview, progress: null, error: null });
    }
    this.draw();
  }

  remove(item) {
    if (item.preview) URL.revokeObjectURL(item.preview);
    this.items = this.items.filter((i) => i !== item);
    this.draw();
  }

  clear() {
    for (const item of this.items) if (item.preview) URL.revokeObjectURL(item.preview);
    this.items = [];
    this.draw();
  }

  get count() { return this.items.length; }

  draw() {
    const { doc } = this;
    this.list.replaceChildren(...this.items.map((item) => {
      const li = el(doc, "li", "attachment");
      if (item.preview) {
        const img = el(doc, "img");
        showBlob(img, item.preview);
        img.alt = "";
        li.append(img);
      }
      li.append(el(doc, "span", "attachment-name", `${item.file.name || "pasted file"} (${formatSize(item.file.size)})`));
      const status = el(doc, "span", "attachment-status");
      status.setAttribute("role", "status");
      status.textContent = item.error ?? (item.progress === null ? "" : `${Math.round(item.progress * 100)}%`);
      li.append(status);
      const remove = el(doc, "button", "secondary attachment-remove", "Remove");
      remove.type = "button";
      remove.setAttribute("aria-label", `Remove ${item.file.name || "pasted file"}`);
      remove.addEventListener("click", () => this.remove(item));
      li.append(remove);
      return li;
    }));
    this.list.hidden = this.items.length === 0;
  }

  /** Upload every waiting file to the chat; the ids of the stored files, or an Error (the files stay, to retry). */
  async uploadAll(api, chatId) {
    const ids = [];
    for (const item of this.items) {
      try {
        item.error = null;
        const stored = await upload(api, chatId, item.file, (share) => { item.progress = share; this.draw(); });
        item.progress = 1;
        ids.push(stored.id);
      } catch (error) {
        item.error = error.message;
        this.draw();
        return error;
      }
      this.draw();
    }
    return ids;
  }
}
