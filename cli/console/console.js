// connect-offsets console: the page served by `connect-offsets serve` at `/`.
// Plain ES2020, no library, no module. It lives under a strict Content-Security-Policy: no inline
// script or style, no eval; text from the server goes in with textContent only.
'use strict';

(function () {
  const TOKEN_KEY = 'connect-offsets-token';
  const POLL_MS = 5000;
  const SUMMARY_POLL_MS = 10000; // a connector's summary (whether it may be modified), in its view
  const PAGE_SIZE = 50;
  const SEARCH_DEBOUNCE_MS = 250;
  const DIFF_ROWS_SHOWN = 200;
  const HISTORY_ITEMS_SHOWN = 500;
  const SVG_NS = 'http://www.w3.org/2000/svg';

  const $ = (sel, root) => (root || document).querySelector(sel);

  // ---------------------------------------------------------------- small helpers

  /** An element with classes and text (text set with textContent, never parsed). */
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const k in attrs) e.setAttribute(k, String(attrs[k]));
    if (text !== undefined) e.textContent = String(text);
    return e;
  }

  function button(text, cls, label) {
    const b = el('button', cls, text);
    b.type = 'button';
    if (label) b.setAttribute('aria-label', label);
    return b;
  }

  function json(v) {
    return v === undefined ? '' : JSON.stringify(v);
  }

  /** JSON with object keys sorted: two partitions are the same when these are equal. */
  function canonical(v) {
    if (Array.isArray(v)) return '[' + v.map(canonical).join(',') + ']';
    if (v && typeof v === 'object') {
      return '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + canonical(v[k])).join(',') + '}';
    }
    return JSON.stringify(v);
  }

  function pad(n, w) {
    return String(n).padStart(w || 2, '0');
  }

  /** `2026-01-02 03:04:05` (UTC) for an RFC 3339 time; '—' for none. */
  function shortTime(s) {
    if (!s) return '—';
    const ms = Date.parse(s);
    if (Number.isNaN(ms)) return s;
    const d = new Date(ms);
    return d.getUTCFullYear() + '-' + pad(d.getUTCMonth() + 1) + '-' + pad(d.getUTCDate()) + ' ' +
      pad(d.getUTCHours()) + ':' + pad(d.getUTCMinutes()) + ':' + pad(d.getUTCSeconds());
  }

  function ago(s) {
    const ms = Date.parse(s);
    if (Number.isNaN(ms)) return '';
    const sec = Math.round((Date.now() - ms) / 1000);
    if (sec < 0) return 'in the future';
    if (sec < 60) return sec + ' s ago';
    if (sec < 3600) return Math.round(sec / 60) + ' min ago';
    if (sec < 86400) return Math.round(sec / 3600) + ' h ago';
    return Math.round(sec / 86400) + ' d ago';
  }

  /** A <time> element showing a UTC time, its full value and age as a tooltip. */
  function timeEl(s) {
    if (!s) return document.createTextNode('—');
    const t = el('time', null, shortTime(s));
    t.dateTime = s;
    t.title = s + ' (' + ago(s) + ')';
    return t;
  }

  function fmtNum(n) {
    return typeof n === 'number' ? n.toLocaleString('en-US') : '—';
  }

  function badge(text, kind) {
    return el('span', 'badge ' + (kind || ''), text);
  }

  function codeEl(v, cls) {
    return el('code', cls || 'json', v === null ? 'null' : json(v));
  }

  const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

  function validTime(s) {
    return RFC3339.test(s) && !Number.isNaN(Date.parse(s.replace(' ', 'T')));
  }

  function enc(s) {
    return encodeURIComponent(s);
  }

  // ---------------------------------------------------------------- API, tokens, CSRF

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  const csrfMeta = document.querySelector('meta[name="csrf-token"]');
  const csrf = csrfMeta ? csrfMeta.content : '';

  function storedToken() {
    try {
      return sessionStorage.getItem(TOKEN_KEY);
    } catch (e) {
      return null;
    }
  }

  function headers(method, hasBody) {
    const h = { Accept: 'application/json' };
    const token = storedToken();
    if (token) h.Authorization = 'Bearer ' + token;
    if (method !== 'GET' && method !== 'HEAD') {
      h['X-CSRF-Token'] = csrf;
      h['Content-Type'] = 'application/json';
    } else if (hasBody) {
      h['Content-Type'] = 'application/json';
    }
    return h;
  }

  /** One request through fetch: {status, ok, text, auth (WWW-Authenticate)}. */
  async function viaFetch(method, url, body, signal) {
    const res = await fetch(url, {
      method,
      headers: headers(method, body !== undefined),
      body,
      signal,
      credentials: 'same-origin',
      cache: 'no-store',
    });
    const text = await res.text();
    return { status: res.status, ok: res.ok, text, auth: res.headers.get('WWW-Authenticate') || '', statusText: res.statusText };
  }

  /** One request through XMLHttpRequest, for an upload whose progress the page shows. */
  function viaXhr(method, url, body, onProgress) {
    return new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open(method, url);
      const h = headers(method, true);
      for (const k in h) xhr.setRequestHeader(k, h[k]);
      if (onProgress) {
        xhr.upload.onprogress = (e) => onProgress(e.loaded, e.lengthComputable ? e.total : 0);
        xhr.upload.onload = () => onProgress(1, 1, true);
      }
      xhr.onload = () => resolve({
        status: xhr.status,
        ok: xhr.status >= 200 && xhr.status < 300,
        text: xhr.responseText,
        auth: xhr.getResponseHeader('WWW-Authenticate') || '',
        statusText: xhr.statusText,
      });
      xhr.onerror = () => reject(new ApiError(0, 'The server did not answer (network error)'));
      xhr.onabort = () => reject(new ApiError(0, 'The upload was cancelled'));
      xhr.send(body);
    });
  }

  /**
   * Calls the API; answers the parsed JSON body, throws ApiError with the server's message.
   * A 401 (bearer token) shows the sign-in form and retries with the token given.
   */
  async function api(method, url, opts) {
    opts = opts || {};
    let body = opts.body;
    if (body !== undefined && typeof body !== 'string' && !(body instanceof Blob)) body = JSON.stringify(body);
    for (let attempt = 0; ; attempt++) {
      let res;
      try {
        res = opts.upload ? await viaXhr(method, url, body, opts.onProgress) : await viaFetch(method, url, body, opts.signal);
      } catch (e) {
        if (e && e.name === 'AbortError') throw e;
        if (e instanceof ApiError) throw e;
        throw new ApiError(0, 'The server did not answer: ' + (e && e.message ? e.message : e));
      }
      if (res.status === 401 && !/^\s*basic/i.test(res.auth)) {
        await signIn(attempt > 0 || !!storedToken());
        continue;
      }
      let data = null;
      if (res.text) {
        try {
          data = JSON.parse(res.text);
        } catch (e) {
          data = null;
        }
      }
      if (!res.ok) {
        const message = data && typeof data.message === 'string' ? data.message
          : (res.text && res.text.length < 500 ? res.text : 'HTTP ' + res.status + ' ' + (res.statusText || ''));
        throw new ApiError(res.status, message);
      }
      if (data === null && res.text) throw new ApiError(res.status, 'The server answered something that is not JSON');
      return data;
    }
  }

  // ---------------------------------------------------------------- sign-in (token auth)

  const signin = $('#signin');
  let signinWaiters = null;
  let signinDeclined = false;

  function signIn(refused) {
    if (signinDeclined) return Promise.reject(new ApiError(401, 'Not signed in: this server needs a token'));
    if (!signinWaiters) {
      signinWaiters = [];
      $('#signin-message').textContent = refused
        ? 'The server refused that token. Enter a valid token.'
        : 'This server needs a token. It is kept in this tab only (session storage).';
      $('#signin-token').value = '';
      if (!signin.open) signin.showModal();
      $('#signin-token').focus();
    }
    return new Promise((resolve, reject) => signinWaiters.push({ resolve, reject }));
  }

  function endSignIn(ok) {
    const waiters = signinWaiters || [];
    signinWaiters = null;
    if (signin.open) signin.close();
    for (const w of waiters) {
      if (ok) w.resolve();
      else w.reject(new ApiError(401, 'Not signed in: this server needs a token'));
    }
  }

  $('#signin-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const token = $('#signin-token').value.trim();
    if (!token) return;
    try {
      sessionStorage.setItem(TOKEN_KEY, token);
    } catch (err) {
      /* session storage unavailable: the token is lost at reload */
    }
    signinDeclined = false;
    $('#signin-open').hidden = true;
    endSignIn(true);
  });
  $('#signin-cancel').addEventListener('click', () => {
    signinDeclined = true;
    $('#signin-open').hidden = false;
    endSignIn(false);
  });
  signin.addEventListener('cancel', (e) => {
    e.preventDefault();
    $('#signin-cancel').click();
  });
  $('#signin-open').addEventListener('click', () => {
    signinDeclined = false;
    $('#signin-open').hidden = true;
    route();
  });

  // ---------------------------------------------------------------- toast

  const toast = $('#toast');
  let toastTimer = 0;

  function showToast(message, isError) {
    clearTimeout(toastTimer);
    toast.setAttribute('role', isError ? 'alert' : 'status');
    toast.setAttribute('aria-live', isError ? 'assertive' : 'polite');
    toast.className = isError ? 'error' : 'ok';
    toast.textContent = message;
    toast.hidden = false;
    toastTimer = setTimeout(() => {
      toast.hidden = true;
    }, isError ? 30000 : 15000);
  }
  toast.addEventListener('click', () => {
    toast.hidden = true;
  });

  function showError(prefix, e) {
    if (e && e.name === 'AbortError') return;
    showToast((prefix ? prefix + ': ' : '') + (e && e.message ? e.message : String(e)), true);
  }

  // ---------------------------------------------------------------- confirmation dialog

  const dialog = $('#dialog');
  const dialogConfirm = $('#dialog-confirm');
  const dialogCancel = $('#dialog-cancel');
  let dialogState = null;

  /**
   * Shows a dry run's changes and asks for a confirmation; `apply` runs on confirm and answers
   * the message the toast shows.
   * changes: [{partition, from, to, connector?}]
   */
  function confirmChanges(o) {
    if (dialog.open) closeDialog();
    $('#dialog-title').textContent = o.title;
    const diff = $('#dialog-diff');
    diff.textContent = '';
    const changes = o.changes || [];
    const summary = $('#dialog-summary');
    if (changes.length === 0) {
      summary.textContent = o.summary ? o.summary + ' ' : '';
      diff.appendChild(el('p', 'nothing', 'Nothing to change'));
      dialogConfirm.disabled = true;
    } else {
      summary.textContent = (o.summary ? o.summary.replace(/[.;]?\s*$/, '. ') : '') +
        (changes.length === 1 ? '1 partition will change' : changes.length.toLocaleString('en-US') + ' partitions will change') +
        ' (dry run: nothing is written until you apply).';
      diff.appendChild(diffTable(changes));
      if (changes.length > DIFF_ROWS_SHOWN) {
        diff.appendChild(el('p', 'muted', '… and ' + (changes.length - DIFF_ROWS_SHOWN).toLocaleString('en-US') + ' more.'));
      }
      dialogConfirm.disabled = false;
    }
    dialogConfirm.textContent = o.confirmLabel || 'Apply';
    dialogCancel.disabled = false;
    // The control that asked (it is disabled while its dry run runs, which moves focus away).
    dialogState = { apply: o.apply, done: o.done, returnFocus: o.returnFocus || document.activeElement };
    dialog.showModal();
    (dialogConfirm.disabled ? dialogCancel : dialogConfirm).focus();
  }

  function diffTable(changes) {
    const withConnector = changes.some((c) => c.connector !== undefined);
    const table = el('table', 'grid diff');
    table.setAttribute('aria-label', 'Changes');
    const head = el('thead');
    const hr = el('tr');
    const cols = (withConnector ? ['Connector'] : []).concat(['Partition', 'From', 'To']);
    for (const c of cols) {
      const th = el('th', null, c);
      th.scope = 'col';
      hr.appendChild(th);
    }
    head.appendChild(hr);
    table.appendChild(head);
    const body = el('tbody');
    const frag = document.createDocumentFragment();
    for (const c of changes.slice(0, DIFF_ROWS_SHOWN)) {
      const tr = el('tr', 'change');
      if (withConnector) tr.appendChild(el('td', 'connector', c.connector));
      const p = el('td', 'partition');
      p.appendChild(codeEl(c.partition));
      const f = el('td', 'from');
      f.appendChild(codeEl(c.from === undefined ? null : c.from, 'json old'));
      const t = el('td', 'to');
      t.appendChild(codeEl(c.to === undefined ? null : c.to, 'json new'));
      tr.append(p, f, t);
      frag.appendChild(tr);
    }
    body.appendChild(frag);
    table.appendChild(body);
    return table;
  }

  function closeDialog() {
    const state = dialogState;
    dialogState = null;
    if (dialog.open) dialog.close();
    if (state && state.returnFocus && document.contains(state.returnFocus) && typeof state.returnFocus.focus === 'function') {
      state.returnFocus.focus();
    }
  }

  dialogCancel.addEventListener('click', closeDialog);
  dialog.addEventListener('cancel', (e) => {
    e.preventDefault();
    if (!dialogCancel.disabled) closeDialog();
  });
  dialog.addEventListener('close', () => {
    dialogState = null;
  });
  // Keep Tab inside the dialog (showModal makes the page inert; this also skips the browser's UI).
  function trapTab(d) {
    d.addEventListener('keydown', (e) => {
      if (e.key !== 'Tab') return;
      const items = Array.from(d.querySelectorAll('button, input, select, textarea, a[href], [tabindex]:not([tabindex="-1"])'))
        .filter((x) => !x.disabled && x.offsetParent !== null);
      if (items.length === 0) return;
      const first = items[0];
      const last = items[items.length - 1];
      if (e.shiftKey && document.activeElement === first) {
        e.preventDefault();
        last.focus();
      } else if (!e.shiftKey && document.activeElement === last) {
        e.preventDefault();
        first.focus();
      }
    });
  }
  trapTab(dialog);
  trapTab(signin);

  dialogConfirm.addEventListener('click', async () => {
    const state = dialogState;
    if (!state || dialogConfirm.disabled) return;
    dialogConfirm.disabled = true;
    dialogCancel.disabled = true;
    const label = dialogConfirm.textContent;
    dialogConfirm.textContent = 'Applying…';
    let message;
    try {
      message = await state.apply();
    } catch (e) {
      dialogConfirm.textContent = label;
      dialogCancel.disabled = false;
      closeDialog();
      showError('Not applied', e);
      if (state.done) state.done(false);
      return;
    }
    dialogConfirm.textContent = label;
    dialogCancel.disabled = false;
    closeDialog();
    // The view shows the new state before the toast says it is done (at most 5 s of waiting).
    if (state.done) {
      try {
        await Promise.race([Promise.resolve(state.done(true)), new Promise((r) => setTimeout(r, 5000))]);
      } catch (e) {
        /* the view says why it could not refresh */
      }
    }
    showToast(message || 'Done');
  });

  // ---------------------------------------------------------------- downloads

  function download(filename, data) {
    const blob = new Blob([JSON.stringify(data, null, 2) + '\n'], { type: 'application/json' });
    const url = URL.createObjectURL(blob);
    const a = el('a');
    a.href = url;
    a.download = filename;
    a.hidden = true;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  }

  // ---------------------------------------------------------------- app state, routing

  let info = { store: '', history: true, connect_configs: false, version: '' };
  let infoLoaded = false;
  let summaries = {}; // name -> summary, from the last /connectors?expand=summary

  async function loadInfo() {
    try {
      info = Object.assign(info, await api('GET', '/console/info'));
      infoLoaded = true;
    } catch (e) {
      if (e.status === 401) throw e;
      // An older server without /console/info: go on with the defaults.
      infoLoaded = true;
    }
    const parts = [];
    if (info.store) parts.push(info.store);
    parts.push(info.history ? 'history on' : 'history off');
    if (info.connect_configs) parts.push('Connect configs read');
    if (info.version) parts.push('v' + info.version);
    $('#store-info').textContent = parts.join(' · ');
  }

  function currentRoute() {
    const h = location.hash || '#/';
    const m = /^#\/connector\/(.+)$/.exec(h);
    if (m) {
      let name;
      try {
        name = decodeURIComponent(m[1]);
      } catch (e) {
        name = m[1];
      }
      return { view: 'connector', name };
    }
    return { view: 'connectors' };
  }

  let active = null; // 'connectors' | connector name view object

  async function route() {
    const r = currentRoute();
    if (!infoLoaded) {
      try {
        await loadInfo();
      } catch (e) {
        showError('Cannot load the console', e);
        return;
      }
    }
    leaveViews();
    if (r.view === 'connector') enterConnector(r.name);
    else enterConnectors();
  }

  function leaveViews() {
    stopListPolling();
    leaveConnector();
  }

  window.addEventListener('hashchange', () => {
    if (dialog.open) closeDialog();
    route();
  });

  // ---------------------------------------------------------------- connectors list

  const listView = $('#connectors-view');
  const connectorsBody = $('#connectors tbody');
  let listTimer = 0;
  let listActive = false;

  function enterConnectors() {
    listActive = true;
    $('#connector').hidden = true;
    listView.hidden = false;
    document.title = 'connect-offsets console';
    $('#orphans').hidden = !info.connect_configs;
    refreshList();
  }

  function stopListPolling() {
    listActive = false;
    clearTimeout(listTimer);
  }

  function scheduleList() {
    clearTimeout(listTimer);
    if (listActive) listTimer = setTimeout(refreshList, POLL_MS);
  }

  let listPromise = null;

  /** Reads the list (and orphans) again; while a read is under way, once more after it. */
  function refreshList() {
    if (listPromise) return listPromise.then(() => refreshList());
    clearTimeout(listTimer);
    listPromise = readList().finally(() => {
      listPromise = null;
      scheduleList();
    });
    return listPromise;
  }

  async function readList() {
    const status = $('#refresh-status');
    try {
      const [list, orphans] = await Promise.all([
        api('GET', '/connectors?expand=summary'),
        info.connect_configs ? api('GET', '/orphans').catch((e) => e) : Promise.resolve(null),
      ]);
      if (!listActive) return;
      summaries = {};
      for (const name in list) summaries[name] = (list[name] && list[name].summary) || {};
      renderConnectors();
      if (info.connect_configs) renderOrphans(orphans);
      status.textContent = 'Updated ' + shortTime(new Date().toISOString()) + ' UTC · refreshes every 5 s';
      status.classList.remove('error-text');
    } catch (e) {
      if (listActive) {
        status.textContent = 'Refresh failed at ' + shortTime(new Date().toISOString()) + ' UTC: ' + e.message;
        status.classList.add('error-text');
      }
    }
  }

  function stateCell(td, s) {
    td.textContent = '';
    if (s.configured === false) td.appendChild(badge('ORPHANED', 'orphaned'));
    else if (s.state) td.appendChild(badge(s.state, 'state-' + String(s.state).toLowerCase()));
    else td.appendChild(document.createTextNode('—'));
  }

  function alarmsCell(td, s) {
    td.textContent = '';
    const a = s.alarms || {};
    if (a.stalled) td.appendChild(badge('stalled', 'alarm-stalled'));
    if (a.backwards) td.appendChild(badge('went backwards', 'alarm-backwards'));
    if (!a.stalled && !a.backwards) td.appendChild(el('span', 'muted', 'none'));
  }

  function renderConnectors() {
    const names = Object.keys(summaries).sort((a, b) => a.localeCompare(b));
    const existing = new Map();
    for (const tr of Array.from(connectorsBody.rows)) existing.set(tr.dataset.connector, tr);
    const frag = document.createDocumentFragment();
    for (const name of names) {
      const s = summaries[name];
      let tr = existing.get(name);
      if (tr) {
        existing.delete(name);
      } else {
        tr = el('tr');
        tr.dataset.connector = name;
        const th = el('th');
        th.scope = 'row';
        const a = el('a', 'open', name);
        a.href = '#/connector/' + enc(name);
        th.appendChild(a);
        tr.append(th, el('td', 'type'), el('td', 'state'), el('td', 'partitions num'), el('td', 'last-write'), el('td', 'lag num'), el('td', 'alarms'));
      }
      tr.classList.toggle('orphaned-row', s.configured === false);
      $('.type', tr).textContent = s.type || '—';
      stateCell($('.state', tr), s);
      $('.partitions', tr).textContent = fmtNum(s.partitions);
      const lw = $('.last-write', tr);
      lw.textContent = '';
      lw.appendChild(timeEl(s.last_write));
      $('.lag', tr).textContent = s.lag === null || s.lag === undefined ? '—' : fmtNum(s.lag);
      alarmsCell($('.alarms', tr), s);
      frag.appendChild(tr);
    }
    for (const tr of existing.values()) tr.remove();
    // Re-appending moves rows into order; a focused link keeps its focus.
    const focused = document.activeElement;
    connectorsBody.appendChild(frag);
    if (focused && focused !== document.activeElement && document.contains(focused)) focused.focus();
    $('#connectors-empty').hidden = names.length > 0;
  }

  function renderOrphans(orphans) {
    const body = $('#orphans-table tbody');
    const section = $('#orphans');
    section.hidden = false;
    if (orphans instanceof Error) {
      $('#orphans-table').closest('.table-wrap').hidden = true;
      $('#orphans-empty').hidden = false;
      $('#orphans-empty').textContent = 'Cannot list orphaned offsets: ' + orphans.message;
      return;
    }
    const list = Array.isArray(orphans) ? orphans : [];
    const focusedName = document.activeElement && document.activeElement.closest && document.activeElement.closest('tr[data-orphan]')
      ? document.activeElement.closest('tr[data-orphan]').dataset.orphan : null;
    const frag = document.createDocumentFragment();
    for (const o of list) {
      const tr = el('tr');
      tr.dataset.orphan = o.name;
      const th = el('th', 'name', o.name);
      th.scope = 'row';
      const lw = el('td', 'last-write');
      lw.appendChild(timeEl(o.last_write));
      const act = el('td', 'actions');
      const b = button('Reset offsets…', 'reset-orphan danger', 'Reset the offsets of orphaned connector ' + o.name);
      b.addEventListener('click', () => resetOrphan(o.name, b));
      act.appendChild(b);
      tr.append(th, el('td', 'type', o.type || '—'), el('td', 'partitions num', fmtNum(o.partitions)), lw, act);
      frag.appendChild(tr);
    }
    body.textContent = '';
    body.appendChild(frag);
    if (focusedName !== null) {
      for (const tr of body.rows) if (tr.dataset.orphan === focusedName) $('.reset-orphan', tr).focus();
    }
    $('#orphans-empty').textContent = 'No orphaned offsets: every connector holding offsets has a config.';
    $('#orphans-empty').hidden = list.length > 0;
    $('#orphans-table').closest('.table-wrap').hidden = list.length === 0;
  }

  async function resetOrphan(name, btn) {
    btn.disabled = true;
    try {
      const dry = await api('DELETE', '/orphans/' + enc(name) + '?dry_run=true');
      confirmChanges({
        returnFocus: btn,
        title: 'Reset the offsets of orphaned connector ' + name,
        summary: dry.message || '',
        changes: dry.changes,
        confirmLabel: 'Reset offsets',
        apply: async () => {
          const r = await api('DELETE', '/orphans/' + enc(name));
          return (r && r.message) || 'The offsets of ' + name + ' were reset';
        },
        done: () => refreshList(),
      });
    } catch (e) {
      showError('Cannot reset ' + name, e);
    } finally {
      btn.disabled = false;
    }
  }

  $('#export-all').addEventListener('click', async (e) => {
    const b = e.currentTarget;
    b.disabled = true;
    try {
      const doc = await api('GET', '/offsets');
      download('connect-offsets-export.json', doc);
      showToast('Exported every connector\'s offsets to connect-offsets-export.json');
    } catch (err) {
      showError('Export failed', err);
    } finally {
      b.disabled = false;
    }
  });

  // Import: dry run (uploaded with progress), the diff in the dialog, then the real import.
  function uploadProgress(loaded, total, done) {
    const bar = $('#progress');
    const text = $('#progress-text');
    $('#import-progress').hidden = false;
    if (done) {
      // Indeterminate: the server reads the document and makes its one atomic write.
      bar.removeAttribute('value');
      text.textContent = 'uploaded; the server is applying it…';
    } else if (total > 0) {
      bar.value = Math.round((loaded / total) * 100);
      text.textContent = bar.value + '% (' + fmtBytes(loaded) + ' of ' + fmtBytes(total) + ')';
    } else {
      bar.removeAttribute('value');
      text.textContent = fmtBytes(loaded);
    }
    bar.textContent = bar.hasAttribute('value') ? bar.value + '%' : text.textContent;
  }

  function fmtBytes(n) {
    if (n < 1024) return n + ' B';
    if (n < 1048576) return (n / 1024).toFixed(1) + ' KB';
    return (n / 1048576).toFixed(1) + ' MB';
  }

  function importChanges(result) {
    const changes = [];
    for (const c of (result && result.connectors) || []) {
      for (const ch of c.changes || []) changes.push({ connector: c.name, partition: ch.partition, from: ch.from, to: ch.to });
    }
    return changes;
  }

  $('#import-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const input = $('#import-file');
    const file = input.files && input.files[0];
    if (!file) {
      showToast('Choose a file to import first', true);
      input.focus();
      return;
    }
    const submit = $('#import-submit');
    submit.disabled = true;
    try {
      const dry = await api('POST', '/offsets/import?dry_run=true', { body: file, upload: true, onProgress: uploadProgress });
      $('#progress').value = 100;
      $('#progress-text').textContent = 'dry run done';
      const n = ((dry && dry.connectors) || []).length;
      confirmChanges({
        returnFocus: submit,
        title: 'Import ' + file.name,
        summary: n === 1 ? '1 connector.' : n + ' connectors.',
        changes: importChanges(dry),
        confirmLabel: 'Import',
        apply: async () => {
          const r = await api('POST', '/offsets/import', { body: file, upload: true, onProgress: uploadProgress });
          $('#progress').value = 100;
          $('#progress-text').textContent = 'imported';
          if (r && r.message) return r.message;
          const changed = importChanges(r).length;
          return 'Imported ' + file.name + ': ' + changed + (changed === 1 ? ' partition' : ' partitions') + ' written';
        },
        done: () => refreshList(),
      });
    } catch (err) {
      $('#progress-text').textContent = 'failed';
      showError('Import of ' + file.name + ' refused', err);
    } finally {
      submit.disabled = false;
    }
  });

  // ---------------------------------------------------------------- one connector

  const connectorView = $('#connector');
  const partitionsBody = $('#partitions tbody');
  const search = $('#partition-search');
  const sortSelect = $('#partition-sort');
  const orderSelect = $('#partition-order');

  const cv = {
    name: null,
    page: 0,
    total: 0,
    q: '',
    sort: 'last_write',
    order: 'desc',
    seq: 0,
    abort: null,
    summaryTimer: 0,
    loading: false,
    modifiable: { ok: true, reason: null },
    historyPartition: undefined, // the partition whose history is shown
    history: null,
    renders: 0,
  };

  function enterConnector(name) {
    if (cv.name !== name) {
      cv.page = 0;
      cv.q = '';
      cv.sort = 'last_write';
      cv.order = 'desc';
      search.value = '';
      sortSelect.value = 'last_write';
      orderSelect.value = 'desc';
      partitionsBody.textContent = '';
      closeHistory();
    }
    cv.name = name;
    listView.hidden = true;
    connectorView.hidden = false;
    document.title = name + ' · connect-offsets console';
    $('#connector-title').textContent = name;
    $('#partitions-caption').textContent = 'Partitions of ' + name;
    // What the list last said of the connector, until its summary is read again (the server
    // refuses a modification anyway when it cannot be made).
    if (summaries[name]) renderConnectorSummary(summaries[name]);
    else {
      cv.modifiable = { ok: true, reason: null };
      applyModifiable();
    }
    // The page of partitions first, the summary after: the server answers one at a time.
    loadPartitions().then(loadSummary);
  }

  function leaveConnector() {
    clearTimeout(cv.summaryTimer);
    if (cv.abort) cv.abort.abort();
    cv.abort = null;
    if (currentRoute().view !== 'connector') {
      cv.name = null;
      connectorView.hidden = true;
      partitionsBody.textContent = '';
      closeHistory();
    }
  }

  async function loadSummary() {
    clearTimeout(cv.summaryTimer);
    const name = cv.name;
    if (!name) return;
    if (cv.loading) {
      cv.summaryTimer = setTimeout(loadSummary, 500);
      return;
    }
    try {
      const list = await api('GET', '/connectors?expand=summary');
      if (cv.name !== name) return;
      for (const n in list) summaries[n] = (list[n] && list[n].summary) || {};
      const s = list[name] && list[name].summary;
      renderConnectorSummary(s || null);
    } catch (e) {
      if (cv.name === name) {
        $('#connector-summary').textContent = 'Cannot read the connector\'s summary: ' + e.message;
        // What refuses the read (a running writer holding the store) refuses a change too.
        cv.modifiable = { ok: false, reason: e.message };
        applyModifiable();
      }
    }
    if (cv.name === name) cv.summaryTimer = setTimeout(loadSummary, SUMMARY_POLL_MS);
  }

  function renderConnectorSummary(s) {
    const badges = $('#connector-badges');
    badges.textContent = '';
    if (!s) {
      $('#connector-summary').textContent = 'This connector is not in the list of connectors with offsets.';
      cv.modifiable = { ok: true, reason: null };
      applyModifiable();
      return;
    }
    if (s.type) badges.appendChild(badge(s.type, 'type'));
    if (s.configured === false) badges.appendChild(badge('ORPHANED', 'orphaned'));
    else if (s.state) badges.appendChild(badge(s.state, 'state-' + String(s.state).toLowerCase()));
    if (s.alarms && s.alarms.stalled) badges.appendChild(badge('stalled', 'alarm-stalled'));
    if (s.alarms && s.alarms.backwards) badges.appendChild(badge('went backwards', 'alarm-backwards'));
    const bits = [fmtNum(s.partitions) + (s.partitions === 1 ? ' partition' : ' partitions')];
    bits.push('last write ' + (s.last_write ? shortTime(s.last_write) + ' UTC (' + ago(s.last_write) + ')' : 'unknown'));
    if (s.lag !== null && s.lag !== undefined) bits.push('lag ' + fmtNum(s.lag));
    $('#connector-summary').textContent = bits.join(' · ');
    cv.modifiable = s.modifiable || { ok: true, reason: null };
    applyModifiable();
  }

  /** Disables every modifying control while the server would refuse a modification. */
  function applyModifiable() {
    const m = cv.modifiable || { ok: true };
    const off = m.ok === false;
    const note = $('#modify-disabled');
    note.hidden = !off;
    note.textContent = off ? 'Offsets cannot be modified now: ' + (m.reason || 'the server refuses modifications') : '';
    for (const b of connectorView.querySelectorAll('#reset-all, #rewind-partition, #rewind-connector, #partitions .edit, #partitions .reset, #partitions .save')) {
      b.disabled = off;
      if (off) b.setAttribute('aria-describedby', 'modify-disabled');
      else b.removeAttribute('aria-describedby');
    }
  }

  function partitionsUrl() {
    const p = new URLSearchParams();
    p.set('page', String(cv.page));
    p.set('size', String(PAGE_SIZE));
    if (cv.q) p.set('q', cv.q);
    p.set('sort', cv.sort);
    p.set('order', cv.order);
    return '/connectors/' + enc(cv.name) + '/offsets/partitions?' + p.toString();
  }

  async function loadPartitions() {
    const name = cv.name;
    if (!name) return;
    if (cv.abort) cv.abort.abort();
    const ctl = typeof AbortController === 'function' ? new AbortController() : null;
    cv.abort = ctl;
    const seq = ++cv.seq;
    cv.loading = true;
    performance.mark('partitions-requested');
    $('#partitions').setAttribute('aria-busy', 'true');
    try {
      const data = await api('GET', partitionsUrl(), { signal: ctl ? ctl.signal : undefined });
      if (seq !== cv.seq || cv.name !== name) return;
      cv.total = data.total || 0;
      // A page past the end (the connector shrank): go to the last one.
      const rows = data.partitions || [];
      if (rows.length === 0 && cv.page > 0 && cv.total > 0) {
        cv.page = Math.max(0, Math.ceil(cv.total / PAGE_SIZE) - 1);
        cv.loading = false;
        return loadPartitions();
      }
      renderPartitions(rows);
      $('#partitions-message').hidden = rows.length > 0;
      $('#partitions-message').textContent = rows.length ? '' : (cv.q ? 'No partition matches “' + cv.q + '”.' : 'This connector holds no offsets.');
    } catch (e) {
      if (e && e.name === 'AbortError') return;
      if (seq !== cv.seq) return;
      partitionsBody.textContent = '';
      $('#partitions-message').hidden = false;
      $('#partitions-message').textContent = 'Cannot read the partitions: ' + e.message;
      cv.total = 0;
      renderPager(0);
    } finally {
      if (seq === cv.seq) {
        cv.loading = false;
        $('#partitions').removeAttribute('aria-busy');
      }
    }
  }

  function renderPager(count) {
    const from = count ? cv.page * PAGE_SIZE + 1 : 0;
    const to = count ? cv.page * PAGE_SIZE + count : 0;
    $('#page-info').textContent = from + '–' + to + ' of ' + cv.total;
    $('#page-prev').disabled = cv.page === 0;
    $('#page-next').disabled = (cv.page + 1) * PAGE_SIZE >= cv.total;
  }

  function renderPartitions(rows) {
    const frag = document.createDocumentFragment();
    const off = cv.modifiable && cv.modifiable.ok === false;
    for (const r of rows) {
      const pjson = json(r.partition);
      const tr = el('tr');
      tr.dataset.partition = pjson;
      const p = el('td', 'partition');
      p.appendChild(el('code', 'json', pjson));
      const o = el('td', 'offset');
      o.appendChild(codeEl(r.offset));
      const lw = el('td', 'last-write');
      lw.appendChild(timeEl(r.last_write));
      const act = el('td', 'actions');
      const short = shortLabel(pjson);
      const edit = button('Edit', 'edit', 'Edit the offset of partition ' + short);
      const reset = button('Reset…', 'reset danger', 'Reset partition ' + short);
      const hist = button('History', 'history', 'History of partition ' + short);
      edit.disabled = off;
      reset.disabled = off;
      act.append(edit, reset, hist);
      tr.append(p, o, lw, act);
      frag.appendChild(tr);
    }
    // Keyboard focus stays on the same button of the same partition across a re-render.
    const focused = document.activeElement;
    let refocus = null;
    if (focused && partitionsBody.contains(focused) && focused.closest('tr')) {
      refocus = { partition: focused.closest('tr').dataset.partition, cls: ['edit', 'reset', 'history'].find((c) => focused.classList.contains(c)) };
    }
    partitionsBody.textContent = '';
    partitionsBody.appendChild(frag);
    rowData = new WeakMap();
    let i = 0;
    for (const tr of partitionsBody.rows) rowData.set(tr, rows[i++]);
    if (cv.historyPartition !== undefined) markHistoryRow();
    if (refocus) {
      for (const tr of partitionsBody.rows) {
        if (tr.dataset.partition === refocus.partition) {
          const b = $('.' + (refocus.cls || 'edit'), tr);
          if (b && !b.disabled) b.focus();
        }
      }
    }
    renderPager(rows.length);
    cv.renders++;
    performance.mark('partitions-rendered');
    document.body.dataset.partitionsRendered = String(rows.length);
    document.body.dataset.partitionsRenders = String(cv.renders);
  }

  function shortLabel(s) {
    return s.length > 80 ? s.slice(0, 77) + '…' : s;
  }

  let rowData = new WeakMap();

  // One listener for every row's buttons (fast for 50 rows, and survives re-renders).
  partitionsBody.addEventListener('click', (e) => {
    const b = e.target.closest('button');
    if (!b || b.disabled) return;
    const tr = b.closest('tr');
    const row = rowData.get(tr);
    if (!row) return;
    if (b.classList.contains('edit')) startEdit(tr, row);
    else if (b.classList.contains('reset')) resetPartition(row, b);
    else if (b.classList.contains('history')) openHistory(row.partition, b);
    else if (b.classList.contains('save')) saveEdit(tr, row);
    else if (b.classList.contains('cancel')) cancelEdit(tr, row);
  });

  let editorIds = 0;

  function startEdit(tr, row) {
    const cell = $('.offset', tr);
    if ($('.offset-editor', cell)) {
      $('.offset-editor', cell).focus();
      return;
    }
    cell.textContent = '';
    const id = 'offset-editor-' + (++editorIds);
    const label = el('label', 'visually-hidden', 'Offset (JSON) of partition ' + shortLabel(json(row.partition)));
    label.htmlFor = id;
    const ta = el('textarea', 'offset-editor');
    ta.id = id;
    ta.spellcheck = false;
    const text = row.offset === null ? 'null' : JSON.stringify(row.offset);
    ta.value = text.length > 60 ? JSON.stringify(row.offset, null, 2) : text;
    ta.rows = Math.min(10, Math.max(2, ta.value.split('\n').length));
    const errId = id + '-error';
    const err = el('div', 'field-error');
    err.id = errId;
    err.setAttribute('role', 'alert');
    err.hidden = true;
    ta.setAttribute('aria-describedby', errId);
    const save = button('Save…', 'save primary', 'Save the offset of partition ' + shortLabel(json(row.partition)));
    const cancel = button('Cancel', 'cancel', 'Cancel editing');
    save.disabled = cv.modifiable && cv.modifiable.ok === false;
    const btns = el('div', 'editor-buttons');
    btns.append(save, cancel);
    cell.append(label, ta, err, btns);
    tr.classList.add('editing');
    ta.addEventListener('keydown', (e) => {
      if (e.key === 'Escape') {
        e.preventDefault();
        cancelEdit(tr, row);
      } else if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        saveEdit(tr, row);
      }
    });
    ta.focus();
    ta.select();
  }

  function cancelEdit(tr, row) {
    const cell = $('.offset', tr);
    cell.textContent = '';
    cell.appendChild(codeEl(row.offset));
    tr.classList.remove('editing');
    const edit = $('.edit', tr);
    if (edit) edit.focus();
  }

  function fieldError(cell, message) {
    const err = $('.field-error', cell);
    const ta = $('.offset-editor', cell);
    if (!message) {
      err.hidden = true;
      err.textContent = '';
      if (ta) ta.removeAttribute('aria-invalid');
      return;
    }
    err.textContent = message;
    err.hidden = false;
    if (ta) ta.setAttribute('aria-invalid', 'true');
  }

  async function saveEdit(tr, row) {
    const cell = $('.offset', tr);
    const ta = $('.offset-editor', cell);
    const save = $('.save', cell);
    if (!ta || save.disabled) return;
    let offset;
    try {
      offset = JSON.parse(ta.value);
    } catch (e) {
      fieldError(cell, 'Not valid JSON: ' + e.message);
      ta.focus();
      return;
    }
    fieldError(cell, null);
    const name = cv.name;
    const body = { offsets: [{ partition: row.partition, offset }] };
    save.disabled = true;
    try {
      const dry = await api('PATCH', '/connectors/' + enc(name) + '/offsets?dry_run=true', { body });
      confirmChanges({
        returnFocus: ta,
        title: 'Write the offset of one partition of ' + name,
        changes: dry.changes,
        confirmLabel: 'Write offset',
        apply: async () => {
          const r = await api('PATCH', '/connectors/' + enc(name) + '/offsets', { body });
          return (r && r.message) || 'The offset was written';
        },
        done: (ok) => (ok ? afterChange() : null),
      });
    } catch (e) {
      fieldError(cell, e.message);
      ta.focus();
    } finally {
      save.disabled = cv.modifiable && cv.modifiable.ok === false;
    }
  }

  async function resetPartition(row, btn) {
    const name = cv.name;
    const body = { offsets: [{ partition: row.partition, offset: null }] };
    btn.disabled = true;
    try {
      const dry = await api('PATCH', '/connectors/' + enc(name) + '/offsets?dry_run=true', { body });
      confirmChanges({
        returnFocus: btn,
        title: 'Reset one partition of ' + name,
        changes: dry.changes,
        confirmLabel: 'Reset partition',
        apply: async () => {
          const r = await api('PATCH', '/connectors/' + enc(name) + '/offsets', { body });
          return (r && r.message) || 'The partition was reset';
        },
        done: (ok) => (ok ? afterChange() : null),
      });
    } catch (e) {
      showError('Cannot reset the partition', e);
    } finally {
      btn.disabled = cv.modifiable && cv.modifiable.ok === false;
    }
  }

  $('#reset-all').addEventListener('click', async (e) => {
    const btn = e.currentTarget;
    const name = cv.name;
    btn.disabled = true;
    try {
      const dry = await api('DELETE', '/connectors/' + enc(name) + '/offsets?dry_run=true');
      confirmChanges({
        returnFocus: btn,
        title: 'Reset every offset of ' + name,
        changes: dry.changes,
        confirmLabel: 'Reset all offsets',
        apply: async () => {
          const r = await api('DELETE', '/connectors/' + enc(name) + '/offsets');
          return (r && r.message) || 'The offsets were reset';
        },
        done: (ok) => (ok ? afterChange() : null),
      });
    } catch (err) {
      showError('Cannot reset ' + name, err);
    } finally {
      btn.disabled = cv.modifiable && cv.modifiable.ok === false;
    }
  });

  $('#export-connector').addEventListener('click', async (e) => {
    const btn = e.currentTarget;
    const name = cv.name;
    btn.disabled = true;
    try {
      const doc = await api('GET', '/connectors/' + enc(name) + '/offsets');
      const file = 'connect-offsets-' + name.replace(/[^A-Za-z0-9._-]+/g, '_') + '.json';
      download(file, doc);
      showToast('Exported the offsets of ' + name + ' to ' + file);
    } catch (err) {
      showError('Export failed', err);
    } finally {
      btn.disabled = false;
    }
  });

  /** Reads the page, the summary and the history again after a change (answers when done). */
  async function afterChange() {
    await loadPartitions();
    await loadSummary();
    if (cv.historyPartition !== undefined) await loadHistory();
  }

  let searchTimer = 0;
  search.addEventListener('input', () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      const q = search.value.trim();
      if (q === cv.q) return;
      cv.q = q;
      cv.page = 0;
      loadPartitions();
    }, SEARCH_DEBOUNCE_MS);
  });
  search.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') {
      e.preventDefault();
      clearTimeout(searchTimer);
      cv.q = search.value.trim();
      cv.page = 0;
      loadPartitions();
    }
  });
  sortSelect.addEventListener('change', () => {
    cv.sort = sortSelect.value;
    cv.order = cv.sort === 'partition' ? 'asc' : 'desc';
    orderSelect.value = cv.order;
    cv.page = 0;
    loadPartitions();
  });
  orderSelect.addEventListener('change', () => {
    cv.order = orderSelect.value;
    cv.page = 0;
    loadPartitions();
  });
  $('#page-prev').addEventListener('click', () => {
    if (cv.page > 0) {
      cv.page--;
      loadPartitions();
    }
  });
  $('#page-next').addEventListener('click', () => {
    if ((cv.page + 1) * PAGE_SIZE < cv.total) {
      cv.page++;
      loadPartitions();
    }
  });

  // ---------------------------------------------------------------- history and rewind

  const historyPanel = $('#history');
  const chart = $('#history-chart');
  const rewindTime = $('#rewind-time');
  let chartModel = null;

  function openHistory(partition, btn) {
    cv.historyPartition = partition;
    historyPanel.hidden = false;
    $('#history-partition').textContent = 'Partition ' + json(partition);
    rewindError(null);
    markHistoryRow();
    loadHistory().then(() => {
      historyPanel.scrollIntoView({ block: 'nearest' });
    });
    historyPanel.focus({ preventScroll: true });
    cv.historyOpener = btn;
  }

  function closeHistory() {
    cv.historyPartition = undefined;
    cv.history = null;
    chartModel = null;
    historyPanel.hidden = true;
    for (const tr of partitionsBody.querySelectorAll('tr.history-open')) tr.classList.remove('history-open');
  }

  $('#history-close').addEventListener('click', () => {
    const opener = cv.historyOpener;
    closeHistory();
    if (opener && document.contains(opener)) opener.focus();
  });

  function markHistoryRow() {
    const key = canonical(cv.historyPartition);
    for (const tr of partitionsBody.rows) {
      const row = rowData.get(tr);
      tr.classList.toggle('history-open', !!row && canonical(row.partition) === key);
    }
  }

  async function loadHistory() {
    const name = cv.name;
    const partition = cv.historyPartition;
    const status = $('#history-status');
    const body = $('#history-body');
    status.textContent = 'Loading history…';
    try {
      let h;
      try {
        h = await api('GET', '/connectors/' + enc(name) + '/offsets/history');
      } catch (e) {
        if (e.status === 404 || e.status === 400) h = { oldest_reachable: null, changes: [], error: e.message };
        else throw e;
      }
      if (cv.name !== name || cv.historyPartition !== partition) return;
      cv.history = h;
      if (!h.oldest_reachable) {
        body.hidden = true;
        status.textContent = 'History is not enabled for this store, so there is nothing to chart or rewind to. ' +
          'The store records how offsets move when it is opened with ?history=<retention> (for example history=7d).' +
          (h.error ? ' (' + h.error + ')' : '');
        return;
      }
      body.hidden = false;
      const key = canonical(partition);
      const changes = (h.changes || []).filter((c) => canonical(c.partition) === key);
      status.textContent = changes.length + (changes.length === 1 ? ' change' : ' changes') +
        ' of this partition retained; a rewind reaches back to ' + shortTime(h.oldest_reachable) + ' UTC.';
      renderHistoryList(changes);
      drawChart(changes, h.oldest_reachable);
      applyModifiable();
    } catch (e) {
      if (cv.name !== name) return;
      body.hidden = true;
      status.textContent = 'Cannot read the history: ' + e.message;
    }
  }

  function renderHistoryList(changes) {
    const list = $('#history-changes');
    list.textContent = '';
    const frag = document.createDocumentFragment();
    for (const c of changes.slice(0, HISTORY_ITEMS_SHOWN)) {
      const li = el('li', 'change-item');
      const head = el('div', 'change-head');
      head.appendChild(timeEl(c.at));
      head.appendChild(el('span', 'writer', c.writer ? 'by ' + c.writer + (c.seq !== undefined ? ' (seq ' + c.seq + ')' : '') : 'by a tool (CLI or console)'));
      const use = button('Use this time', 'use-time link', 'Rewind to ' + c.at);
      use.addEventListener('click', () => setRewindTime(c.at, true));
      head.appendChild(use);
      const move = el('div', 'change-move');
      move.appendChild(codeEl(c.from === undefined ? null : c.from, 'json old'));
      move.appendChild(el('span', 'arrow', ' → '));
      move.appendChild(codeEl(c.to === undefined ? null : c.to, 'json new'));
      li.append(head, move);
      frag.appendChild(li);
    }
    if (changes.length === 0) frag.appendChild(el('li', 'muted', 'No change of this partition is retained.'));
    if (changes.length > HISTORY_ITEMS_SHOWN) {
      frag.appendChild(el('li', 'muted', '… and ' + (changes.length - HISTORY_ITEMS_SHOWN) + ' older changes.'));
    }
    list.appendChild(frag);
  }

  function fmtAxisTime(ms, span) {
    const d = new Date(ms);
    const hms = pad(d.getUTCHours()) + ':' + pad(d.getUTCMinutes()) + ':' + pad(d.getUTCSeconds());
    if (span < 10000) return hms + '.' + pad(d.getUTCMilliseconds(), 3);
    if (span > 86400000 * 2) return d.getUTCFullYear() + '-' + pad(d.getUTCMonth() + 1) + '-' + pad(d.getUTCDate());
    if (span > 86400000 / 2) return pad(d.getUTCMonth() + 1) + '-' + pad(d.getUTCDate()) + ' ' + hms.slice(0, 5);
    return hms;
  }

  function fmtValue(v) {
    if (!Number.isFinite(v)) return String(v);
    if (Number.isInteger(v)) return String(v);
    return String(Math.round(v * 1000) / 1000);
  }

  /**
   * The chart: time on x; one lane per numeric field of the offsets (each with its own scale,
   * as fields such as a position and a timestamp differ by orders of magnitude), a step line per
   * field (an offset holds until its next change) and a point per change.
   */
  function drawChart(changesNewestFirst, oldest) {
    while (chart.lastChild && chart.lastChild.nodeName !== 'title') chart.removeChild(chart.lastChild);
    const changes = changesNewestFirst.slice().reverse().map((c) => ({ c, t: Date.parse(c.at) })).filter((x) => !Number.isNaN(x.t));
    const fields = [];
    for (const { c } of changes) {
      if (c.to && typeof c.to === 'object') {
        for (const k of Object.keys(c.to)) if (typeof c.to[k] === 'number' && !fields.includes(k)) fields.push(k);
      }
    }
    const W = 720;
    const L = 110;
    const R = 24;
    const T = 10;
    const LANE = 86;
    const GAP = 18;
    const lanes = Math.max(1, fields.length);
    const H = T + lanes * (LANE + GAP) + 34;
    chart.setAttribute('viewBox', '0 0 ' + W + ' ' + H);

    let t0;
    let t1;
    if (changes.length) {
      t0 = changes[0].t;
      t1 = changes[changes.length - 1].t;
    } else {
      t1 = Date.now();
      t0 = Date.parse(oldest) || t1 - 3600000;
    }
    if (t1 - t0 < 1000) {
      t0 -= 30000;
      t1 += 30000;
    }
    const padT = (t1 - t0) * 0.05;
    t0 -= padT;
    t1 += padT;
    const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
    const xToT = (px) => t0 + ((px - L) / (W - L - R)) * (t1 - t0);
    const bottom = T + lanes * (LANE + GAP);

    const g = svg('g', { class: 'chart' });
    // Background catching clicks anywhere in the plot.
    g.appendChild(svg('rect', { class: 'plot-bg', x: L, y: T, width: W - L - R, height: bottom - T }));

    // x axis and its time labels.
    const axis = svg('g', { class: 'axis x-axis' });
    axis.appendChild(svg('line', { x1: L, y1: bottom, x2: W - R, y2: bottom }));
    const ticks = 5;
    for (let i = 0; i <= ticks; i++) {
      const t = t0 + ((t1 - t0) * i) / ticks;
      const px = x(t);
      axis.appendChild(svg('line', { class: 'grid-line', x1: px, y1: T, x2: px, y2: bottom }));
      axis.appendChild(svg('text', { x: px, y: bottom + 16, 'text-anchor': i === 0 ? 'start' : i === ticks ? 'end' : 'middle' }, fmtAxisTime(t, t1 - t0)));
    }
    axis.appendChild(svg('text', { class: 'axis-title', x: W - R, y: bottom + 30, 'text-anchor': 'end' }, 'time (UTC)'));
    g.appendChild(axis);

    const laneTop = (i) => T + i * (LANE + GAP) + GAP;
    const yFor = [];
    fields.forEach((f, i) => {
      const vals = changes.map(({ c }) => (c.to && typeof c.to[f] === 'number' ? c.to[f] : null)).filter((v) => v !== null);
      let lo = Math.min.apply(null, vals);
      let hi = Math.max.apply(null, vals);
      if (lo === hi) {
        lo -= 1;
        hi += 1;
      }
      const top = laneTop(i);
      const y = (v) => top + LANE - ((v - lo) / (hi - lo)) * LANE;
      yFor.push(y);
      const lane = svg('g', { class: 'lane' });
      const fieldLabel = svg('text', { class: 'field-name', x: L - 8, y: top + LANE / 2 + 4, 'text-anchor': 'end' }, f.length > 14 ? f.slice(0, 13) + '…' : f);
      fieldLabel.appendChild(svg('title', {}, f));
      lane.appendChild(fieldLabel);
      lane.appendChild(svg('line', { class: 'axis-line', x1: L, y1: top, x2: L, y2: top + LANE }));
      lane.appendChild(svg('text', { class: 'value-label', x: L - 6, y: top + 4, 'text-anchor': 'end' }, fmtValue(hi)));
      lane.appendChild(svg('text', { class: 'value-label', x: L - 6, y: top + LANE, 'text-anchor': 'end' }, fmtValue(lo)));
      // Step line: each value holds until the next change; a reset (null) breaks the line.
      let d = '';
      let open = false;
      for (let k = 0; k < changes.length; k++) {
        const { c, t } = changes[k];
        const v = c.to && typeof c.to[f] === 'number' ? c.to[f] : null;
        if (v === null) {
          open = false;
          continue;
        }
        d += (open ? ' H' + x(t).toFixed(1) + ' V' : ' M' + x(t).toFixed(1) + ' ') + y(v).toFixed(1);
        open = true;
      }
      if (open) d += ' H' + (W - R);
      lane.appendChild(svg('path', { class: 'series series-' + (i % 6), 'data-field': f, d: d.trim() || 'M0 0' }));
      g.appendChild(lane);
    });

    // One point per change: on the first field's lane (a reset, or no number: on its baseline);
    // the other fields get dots.
    const points = svg('g', { class: 'points' });
    for (const { c, t } of changes) {
      const px = x(t);
      let py = laneTop(0) + LANE;
      const f0 = fields[0];
      const v0 = f0 !== undefined && c.to && typeof c.to[f0] === 'number' ? c.to[f0] : null;
      if (v0 !== null) py = yFor[0](v0);
      const pt = svg('circle', { class: 'point' + (c.to === null ? ' reset' : ''), cx: px.toFixed(1), cy: py.toFixed(1), r: 4, 'data-at': c.at });
      pt.appendChild(svg('title', {}, c.at + (c.to === null ? ': reset' : ': ' + json(c.to)) + (c.writer ? ' by ' + c.writer : '')));
      points.appendChild(pt);
      fields.forEach((f, i) => {
        if (i === 0 || !c.to || typeof c.to[f] !== 'number') return;
        points.appendChild(svg('circle', { class: 'dot series-' + (i % 6), cx: px.toFixed(1), cy: yFor[i](c.to[f]).toFixed(1), r: 3 }));
      });
    }
    g.appendChild(points);
    if (!fields.length) {
      g.appendChild(svg('text', { class: 'empty-note', x: (L + W - R) / 2, y: T + GAP + LANE / 2, 'text-anchor': 'middle' },
        changes.length ? 'No numeric field in these offsets' : 'No change retained'));
    }
    const marker = svg('line', { class: 'rewind-marker', x1: 0, y1: T, x2: 0, y2: bottom, visibility: 'hidden' });
    g.appendChild(marker);
    chart.appendChild(g);
    chartModel = { x, xToT, changes, marker, L, R, W, t0, t1 };
    updateMarker();
  }

  function updateMarker() {
    if (!chartModel) return;
    const s = rewindTime.value.trim();
    const t = validTime(s) ? Date.parse(s.replace(' ', 'T')) : NaN;
    const m = chartModel.marker;
    if (Number.isNaN(t) || t < chartModel.t0 || t > chartModel.t1) {
      m.setAttribute('visibility', 'hidden');
      return;
    }
    const px = chartModel.x(t).toFixed(1);
    m.setAttribute('x1', px);
    m.setAttribute('x2', px);
    m.setAttribute('visibility', 'visible');
  }

  function setRewindTime(s, focus) {
    rewindTime.value = s;
    rewindError(null);
    updateMarker();
    if (focus) rewindTime.focus();
  }

  chart.addEventListener('click', (e) => {
    if (!chartModel) return;
    const ctm = chart.getScreenCTM();
    if (!ctm) return;
    const p = chart.createSVGPoint();
    p.x = e.clientX;
    p.y = e.clientY;
    const sp = p.matrixTransform(ctm.inverse());
    const m = chartModel;
    const px = Math.min(Math.max(sp.x, m.L), m.W - m.R);
    // Near a change (8 units): that change's exact time; anywhere else: the time under the click.
    let best = null;
    let bestD = Infinity;
    for (const ch of m.changes) {
      const d = Math.abs(m.x(ch.t) - px);
      if (d < bestD) {
        bestD = d;
        best = ch;
      }
    }
    if (best && bestD <= 8) setRewindTime(best.c.at);
    else setRewindTime(new Date(Math.round(m.xToT(px))).toISOString());
  });

  rewindTime.addEventListener('input', () => {
    rewindError(null);
    updateMarker();
  });

  function rewindError(message) {
    const err = $('#rewind-error');
    err.textContent = message || '';
    err.hidden = !message;
    if (message) rewindTime.setAttribute('aria-invalid', 'true');
    else rewindTime.removeAttribute('aria-invalid');
  }

  async function rewind(whole, btn) {
    const name = cv.name;
    const to = rewindTime.value.trim();
    if (!validTime(to)) {
      rewindError(to ? '“' + to + '” is not an RFC 3339 time (e.g. 2026-01-01T12:00:00Z or 2026-01-01T13:00:00.250+01:00)' : 'Pick a time on the chart or type one first');
      rewindTime.focus();
      return;
    }
    rewindError(null);
    const body = { to, dry_run: true };
    if (!whole) body.partition = cv.historyPartition;
    btn.disabled = true;
    try {
      const dry = await api('POST', '/connectors/' + enc(name) + '/offsets/rewind', { body });
      const what = whole ? 'connector ' + name : 'one partition of ' + name;
      confirmChanges({
        returnFocus: btn,
        title: 'Rewind ' + what + ' to ' + (dry.at || to),
        summary: dry.message || '',
        changes: dry.changes,
        confirmLabel: 'Rewind',
        apply: async () => {
          const r = await api('POST', '/connectors/' + enc(name) + '/offsets/rewind', { body: Object.assign({}, body, { dry_run: false }) });
          return (r && r.message) || 'Rewound ' + what + ' to ' + (r && r.at ? r.at : to);
        },
        done: (ok) => (ok ? afterChange() : null),
      });
    } catch (e) {
      rewindError(e.message);
    } finally {
      btn.disabled = cv.modifiable && cv.modifiable.ok === false;
    }
  }

  $('#rewind-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const b = $('#rewind-partition');
    if (!b.disabled) rewind(false, b);
  });
  $('#rewind-connector').addEventListener('click', (e) => rewind(true, e.currentTarget));

  // ---------------------------------------------------------------- start

  route();
})();
