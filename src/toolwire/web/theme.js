// The colour theme: the system's (the default), light or dark, remembered in localStorage.
//
// The choice is set as `data-theme` on <html>; style.css picks its colours from it, and from the system's
// setting when there is none. The page's module scripts run after the first paint, so a remembered theme
// other than the system's shows from the second frame: a blink the page accepts to keep every script a
// file of its own (the Content-Security-Policy allows no inline script).

export const THEME_KEY = "toolwire.theme";
export const THEMES = ["system", "light", "dark"];
const LABEL = { system: "Theme: system", light: "Theme: light", dark: "Theme: dark" };

export function storedTheme(storage = globalThis.localStorage) {
  const value = storage?.getItem(THEME_KEY);
  return THEMES.includes(value) ? value : "system";
}

export function applyTheme(theme, doc = document) {
  if (theme === "system") delete doc.documentElement.dataset.theme;
  else doc.documentElement.dataset.theme = theme;
}

/** Wire the toggle button: each click takes the next theme (system → light → dark → system). */
export function bindThemeButton(button, storage = globalThis.localStorage) {
  const show = (theme) => {
    button.textContent = LABEL[theme];
    button.dataset.theme = theme;
    button.title = "Change the colour theme (system, light, dark)";
  };
  let theme = storedTheme(storage);
  applyTheme(theme, button.ownerDocument);
  show(theme);
  button.addEventListener("click", () => {
    theme = THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length];
    if (theme === "system") storage.removeItem(THEME_KEY);
    else storage.setItem(THEME_KEY, theme);
    applyTheme(theme, button.ownerDocument);
    show(theme);
  });
}
