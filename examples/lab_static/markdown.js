// A tiny markdown renderer for text that is still arriving.
// What a person must never see mid-stream: literal ``` or $$ markers, a half-open table, a row being
// typed. An open fence renders as code in progress; a table shows only its complete rows; a line that
// is still only markers is held back until it says what it is. Everything is escaped: no raw HTML.
"use strict";

const MD = (() => {
  const esc = (s) => s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);

  const FENCE = /^\s*(```|~~~)\s*([\w+#.-]*)\s*$/;
  const MATH_OPEN = /^\s*\$\$/;
  const TABLE_SEP = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;
  const LIST = /^(\s*)([-*+]|\d+\.)\s+(.*)$/;

  const PY = /(#.*$)|("(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?)|\b(def|return|import|from|for|in|if|else|elif|while|and|or|not|None|True|False|class|with|as|async|await|yield|lambda)\b|\b(\d+(?:\.\d+)?)\b/gm;

  function highlight(code) {
    let out = "", last = 0;
    code.replace(PY, (m, comment, str, kw, num, at) => {
      out += esc(code.slice(last, at));
      const cls = comment ? "c" : str ? "s" : kw ? "k" : "n";
      out += `<span class="tok-${cls}">${esc(m)}</span>`;
      last = at + m.length;
      return m;
    });
    return out + esc(code.slice(last));
  }

  function inline(s) {
    if (((s.match(/`/g) || []).length) % 2) s += "`"; // an open code span closes at the end, for now
    const codes = []; // code spans out of the way first, so emphasis may contain them
    let h = esc(s.replace(/`([^`]*)`/g, (_, code) => `\u0000${codes.push(code) - 1}\u0000`));
    if (((h.match(/\*\*/g) || []).length) % 2) h += "**"; // likewise an open **bold
    if (((h.replace(/\*\*/g, "").match(/\*/g) || []).length) % 2) h += "*"; // and an open *emphasis
    h = h.replace(/\*\*(.+?)\*\*/g, "<strong>$1</strong>");
    h = h.replace(/(^|[^*\w])\*(?!\s)([^*]+?)\*(?!\w)/g, "$1<em>$2</em>");
    h = h.replace(/\[([^\]]+)\]\((https?:[^)\s]+)\)/g, '<a href="$2" rel="noreferrer">$1</a>');
    h = h.replace(/\*+$/, ""); // a lone trailing * is a marker still being typed
    return h.replace(/\u0000(\d+)\u0000/g, (_, i) => `<code>${esc(codes[Number(i)])}</code>`);
  }

  // A few TeX commands as HTML: enough for fractions, sub/superscripts, \text and common symbols.
  const SYMBOLS = { sum: "∑", approx: "≈", le: "≤", ge: "≥", cdot: "·", times: "×", infty: "∞", to: "→",
    alpha: "α", beta: "β", mu: "μ", sigma: "σ", Delta: "Δ", ",": "\u2009", quad: "\u2003", " ": " " };
  function tex(src) {
    let i = 0;
    const arg = () => {
      while (src[i] === " ") i++;
      return atom();
    };
    const group = () => {
      let out = "";
      while (i < src.length && src[i] !== "}") out += atom();
      i++;
      return out;
    };
    function atom() {
      const c = src[i++];
      if (c === undefined) return "";
      if (c === "{") return group();
      if (c === "_") return `<sub>${arg()}</sub>`;
      if (c === "^") return `<sup>${arg()}</sup>`;
      if (c === "\\") {
        const name = /^[a-zA-Z]+/.exec(src.slice(i))?.[0] ?? src[i] ?? "";
        i += name.length;
        if (name === "frac") return `<span class="frac"><span>${arg()}</span><span>${arg()}</span></span>`;
        if (["text", "mathrm", "operatorname", "textrm"].includes(name)) return `<span class="rm">${arg()}</span>`;
        return SYMBOLS[name] ?? esc(name);
      }
      if (/[a-zA-Z]/.test(c)) return `<i>${c}</i>`;
      if ("=+-<>".includes(c)) return `<span class="op">${esc(c === "-" ? "−" : c)}</span>`;
      return esc(c);
    }
    let out = "";
    while (i < src.length) out += src[i] === "}" ? (i++, "") : atom();
    return out;
  }

  function codeBlock(lang, lines, open) {
    const head = `<div class="code-head"><span>${esc(lang || "code")}</span>${open ? '<span class="live">writing…</span>' : ""}</div>`;
    return `<div class="codeblock${open ? " open" : ""}">${head}<pre><code>${highlight(lines.join("\n"))}</code></pre></div>`;
  }

  function table(rows) {
    if (rows.length < 2 || !TABLE_SEP.test(rows[1])) return ""; // no header separator yet: nothing to draw
    const cells = (row) => row.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
    const align = cells(rows[1]).map((c) => (c.endsWith(":") ? (c.startsWith(":") ? "center" : "right") : "left"));
    const tr = (row, tag) => "<tr>" + cells(row).map((c, k) =>
      `<${tag} style="text-align:${align[k] || "left"}">${inline(c)}</${tag}>`).join("") + "</tr>";
    const body = rows.slice(2).map((r) => tr(r, "td")).join("");
    return `<table><thead>${tr(rows[0], "th")}</thead><tbody>${body}</tbody></table>`;
  }

  // While streaming, decide what to do with the unfinished last line, given the block it falls in.
  function partialLine(line, inFence, inMath) {
    if (inFence) return /^\s*(`{1,3}|~{1,3})\s*$/.test(line) ? null : line;
    if (inMath) return /^\s*\$?\s*$/.test(line) ? null : line;
    if (/^\s*(```|~~~)/.test(line)) return "```"; // a fence being opened: code in progress, language soon
    if (/^\s*(`{1,2}|~{1,2})$/.test(line)) return null;
    if (/^\s*\$/.test(line)) return line.trim().startsWith("$$") ? "$$" : null;
    if (/^\s*\|/.test(line)) return null; // a table row being typed
    if (/^\s*(#{1,6}|>|[-*+]|\d+\.?)?\s*$/.test(line)) return null; // only markers so far
    return line;
  }

  function render(src, streaming) {
    const lines = src.split("\n");
    if (streaming) {
      const last = lines.pop();
      let fence = false, math = false;
      for (const l of lines) {
        if (!math && FENCE.test(l)) fence = !fence;
        else if (!fence && l.trim() === "$$") math = !math;
      }
      const kept = partialLine(last, fence, math);
      if (kept !== null) lines.push(kept);
    }
    const out = [];
    let para = [];
    const flush = () => {
      if (para.length) out.push(`<p>${inline(para.join(" "))}</p>`);
      para = [];
    };
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      let m;
      if ((m = FENCE.exec(line))) {
        flush();
        const body = [];
        while (++i < lines.length && !new RegExp(`^\\s*${m[1]}\\s*$`).test(lines[i])) body.push(lines[i]);
        out.push(codeBlock(m[2], body, i >= lines.length));
      } else if (MATH_OPEN.test(line)) {
        flush();
        const one = /^\s*\$\$(.+)\$\$\s*$/.exec(line);
        const body = one ? [one[1]] : [line.trim().slice(2)];
        if (!one) while (++i < lines.length && lines[i].trim() !== "$$") body.push(lines[i]);
        const open = !one && i >= lines.length;
        const inner = body.join(" ").trim();
        out.push(open ? `<div class="math open"><code>${esc(inner)}</code></div>` : `<div class="math">${tex(inner)}</div>`);
      } else if (/^\s*\|/.test(line)) {
        flush();
        const rows = [line];
        while (i + 1 < lines.length && /^\s*\|/.test(lines[i + 1])) rows.push(lines[++i]);
        out.push(table(rows));
      } else if ((m = /^(#{1,6})\s+(.*)$/.exec(line))) {
        flush();
        out.push(`<h${m[1].length}>${inline(m[2])}</h${m[1].length}>`);
      } else if (/^\s*(-{3,}|\*{3,})\s*$/.test(line)) {
        flush();
        out.push("<hr>");
      } else if (/^\s*>/.test(line)) {
        flush();
        const quote = [line.replace(/^\s*>\s?/, "")];
        while (i + 1 < lines.length && /^\s*>/.test(lines[i + 1])) quote.push(lines[++i].replace(/^\s*>\s?/, ""));
        out.push(`<blockquote>${inline(quote.join(" "))}</blockquote>`);
      } else if ((m = LIST.exec(line))) {
        flush();
        const ordered = /\d/.test(m[2]);
        const items = [m[3]];
        while (i + 1 < lines.length && lines[i + 1].trim() !== "") {
          const next = LIST.exec(lines[i + 1]);
          if (next) items.push(next[3]);
          else if (/^\s+/.test(lines[i + 1])) items[items.length - 1] += " " + lines[i + 1].trim();
          else break;
          i++;
        }
        const tag = ordered ? "ol" : "ul";
        out.push(`<${tag}>${items.map((it) => `<li>${inline(it)}</li>`).join("")}</${tag}>`);
      } else if (line.trim() === "") {
        flush();
      } else {
        para.push(line.trim());
      }
    }
    flush();
    return out.join("");
  }

  return { render, esc };
})();

window.MD = MD;
