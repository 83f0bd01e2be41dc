// Copy buttons: a message's text, and each code block of rendered Markdown.
//
// `copyButton(text)` makes the button; `addCodeCopyButtons(root)` gives every `<pre>` under `root` one (the
// Markdown renderer's output is passed through it after each render, so a code block gets its button
// however it was drawn). The clipboard is written with `navigator.clipboard.writeText`, which browsers
// allow on https and localhost pages in answer to a click; elsewhere the button says it could not copy.

const SAID_FOR_MS = 1500;

/**
 * A small button that copies `text()` (a function: the text at the moment of the click). Its visible label
 * is drawn by style.css from `data-label`, so that the conversation's text (what a person selects and
 * copies by hand, what find-in-page searches) holds the messages only.
 */
export function copyButton(text, label = "Copy") {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "copy";
  const name = label === "Copy" ? "Copy text" : label;
  const show = (said, spoken) => {
    button.dataset.label = said;
    button.setAttribute("aria-label", spoken);
  };
  show(label, name);
  let timer = null;
  button.addEventListener("click", async () => {
    let said;
    try {
      await navigator.clipboard.writeText(text());
      said = "Copied";
    } catch {
      said = "Could not copy";
    }
    show(said, said);
    clearTimeout(timer);
    timer = setTimeout(() => show(label, name), SAID_FOR_MS);
  });
  return button;
}

/** Give each code block under `root` a copy button (once), which copies the code as it is shown. */
export function addCodeCopyButtons(root) {
  for (const pre of root.querySelectorAll("pre")) {
    if (pre.parentElement?.classList.contains("code-block")) continue;
    const wrapper = document.createElement("div");
    wrapper.className = "code-block";
    pre.replaceWith(wrapper);
    // The code without the line end the block closes with (the fence's own, not the code's).
    const button = copyButton(() => pre.textContent.replace(/\n$/, ""), "Copy code");
    wrapper.append(button, pre);
  }
  return root;
}
