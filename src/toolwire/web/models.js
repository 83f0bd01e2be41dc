// The model picker (docs/guides/models.md): a native <select> of the server's models, one choice per chat.
//
// Hidden while the server offers fewer than two models (or is older and has no `api/models`). In an open chat
// it shows the chat's model (its own choice, or the server's default) and a change is stored with the chat at
// once (`PATCH`), for its next run; on the empty page the choice goes with the chat the first message creates.

export class ModelPicker {
  /**
   * @param {HTMLElement} box the picker's row (hidden when there is nothing to choose)
   * @param {HTMLSelectElement} select
   * @param {{onError: (error: Error) => void}} options
   */
  constructor(box, select, { onError }) {
    this.box = box;
    this.select = select;
    this.onError = onError;
    this.api = null;
    this.models = [];
    this.chatId = null; // the open chat whose model is shown, or null on the empty page
    this.stored = null; // the open chat's model as the server has it (a refused change goes back to it)
    select.addEventListener("change", () => this.changed());
  }

  /** Ask the server for its models (at sign-in); draws the options, or hides the picker. */
  async load(api) {
    this.api = api;
    let models = [];
    try {
      ({ models } = await api.listModels());
    } catch {
      models = []; // an older server, or one that offers no choice: no picker
    }
    if (api !== this.api) return;
    this.models = Array.isArray(models) ? models : [];
    const doc = this.select.ownerDocument;
    this.select.replaceChildren(...this.models.map((model) => {
      const option = doc.createElement("option");
      option.value = model.id;
      option.textContent = model.label || model.id;
      return option;
    }));
    this.box.hidden = this.models.length < 2;
    this.show(this.chatId, this.stored);
  }

  get defaultId() {
    return (this.models.find((model) => model.default) ?? this.models[0])?.id ?? null;
  }

  /** Show the model of the chat `chatId` (`model`: its stored choice, null for the default); null: the empty page. */
  show(chatId, model) {
    this.chatId = chatId;
    this.stored = model ?? null;
    const offered = this.models.some((m) => m.id === model);
    const shown = offered ? model : this.defaultId; // a model the server no longer offers runs on the default
    if (shown !== null) this.select.value = shown;
  }

  /** The model a new chat is created with: the one picked on the empty page (null when there is no choice). */
  choice() {
    return this.box.hidden || this.select.value === "" ? null : this.select.value;
  }

  async changed() {
    const chatId = this.chatId;
    if (chatId === null || this.api === null) return; // the empty page: kept for the chat made by the first message
    const model = this.select.value;
    try {
      const chat = await this.api.setChatModel(chatId, model);
      if (this.chatId === chatId) this.stored = chat.model ?? null;
    } catch (error) {
      if (this.chatId === chatId) this.show(chatId, this.stored);
      this.onError(error);
    }
  }
}
