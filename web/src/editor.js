// The playground's editor: CodeMirror 6 with Python highlighting and
// indentation, lint markers and an error-line highlight. web/build.sh
// bundles this file into internal/api/web/editor.js; the page imports
// only what is exported here.
import { EditorState, StateEffect, StateField } from "@codemirror/state";
import {
  EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter,
  drawSelection, Decoration,
} from "@codemirror/view";
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import { indentOnInput, bracketMatching, syntaxHighlighting, defaultHighlightStyle } from "@codemirror/language";
import { searchKeymap, highlightSelectionMatches } from "@codemirror/search";
import { lintGutter, setDiagnostics } from "@codemirror/lint";
import { python } from "@codemirror/lang-python";

const setErrorLine = StateEffect.define();
const errorLineMark = Decoration.line({ class: "cm-error-line", attributes: { "data-error-line": "true" } });

// errorLine holds the highlighted line (one at most); any edit clears it.
const errorLine = StateField.define({
  create: () => Decoration.none,
  update(deco, tr) {
    for (const e of tr.effects) {
      if (e.is(setErrorLine)) {
        if (e.value < 1 || e.value > tr.state.doc.lines) return Decoration.none;
        return Decoration.set([errorLineMark.range(tr.state.doc.line(e.value).from)]);
      }
    }
    return tr.docChanged ? Decoration.none : deco;
  },
  provide: (f) => EditorView.decorations.from(f),
});

// createEditor makes an editor in parent. onRun is called on Ctrl+Enter
// (Cmd+Enter on a Mac), onChange after each change of the text; label names the editor for screen readers; nonce is
// the page's Content-Security-Policy nonce, which the editor's style
// element needs. Tab indents; Escape then Tab leaves the editor
// (CodeMirror's tab-focus mode).
export function createEditor(parent, { doc = "", onRun = () => {}, onChange = () => {}, label = "Python code", nonce = "" } = {}) {
  const run = () => { onRun(); return true; };
  const view = new EditorView({
    parent,
    state: EditorState.create({
      doc,
      extensions: [
        lineNumbers(), highlightActiveLineGutter(), history(), drawSelection(),
        indentOnInput(), bracketMatching(), highlightActiveLine(), highlightSelectionMatches(),
        syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
        python(), lintGutter(), errorLine,
        keymap.of([{ key: "Mod-Enter", run }, { key: "Shift-Enter", run }, indentWithTab,
          ...defaultKeymap, ...historyKeymap, ...searchKeymap]),
        EditorView.contentAttributes.of({ "aria-label": label }),
        EditorView.cspNonce.of(nonce),
        EditorView.updateListener.of((u) => { if (u.docChanged) onChange(); }),
      ],
    }),
  });
  return {
    view,
    get value() { return view.state.doc.toString(); },
    set value(text) {
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
    },
    focus() { view.focus(); },
    // markError highlights line n (1-based) and scrolls to it; 0 clears.
    markError(n) {
      const effects = [setErrorLine.of(n)];
      if (n >= 1 && n <= view.state.doc.lines) {
        effects.push(EditorView.scrollIntoView(view.state.doc.line(n).from, { y: "center" }));
      }
      view.dispatch({ effects });
    },
    // setLint shows ruff's diagnostics ({line, column, end_line,
    // end_column, code, message}, 1-based) as editor markers.
    setLint(list) {
      const doc = view.state.doc;
      const pos = (line, col) => {
        if (line < 1) return 0;
        if (line > doc.lines) return doc.length;
        const l = doc.line(line);
        return Math.min(l.from + Math.max(col - 1, 0), l.to);
      };
      const diags = list.map((d) => {
        const from = pos(d.line, d.column);
        let to = pos(d.end_line || d.line, d.end_column || d.column);
        if (to < from) to = from;
        return { from, to, severity: "warning", source: d.code, message: d.message };
      });
      view.dispatch(setDiagnostics(view.state, diags));
    },
  };
}
