// triage dashboard: talks to /api/v1 with the operator's bearer token.
// Plain JavaScript with no dependencies; every value from the API is put on
// the page with textContent, never as HTML.
(() => {
  'use strict';

  const TOKEN_KEY = 'triage.token';
  const REFRESH_MS = 2000;
  const LIVE_MIN_MS = 300; // live events refresh the page at most this often
  const LIVE_RETRY_MS = 5000; // a broken event stream is reopened after this
  const LIST_LIMIT = 50;
  const PRIORITIES = ['high', 'medium', 'low'];
  const STATUSES = ['scheduled', 'queued', 'executing', 'retrying', 'completed', 'cancelled', 'dead_letter'];
  const TERMINAL = new Set(['completed', 'cancelled', 'dead_letter']);
  // Only a dead-lettered task can be retried: the API answers 409 for any
  // other status, a cancelled one included (it finished as asked).
  const RETRIABLE = new Set(['dead_letter']);
  const SUBMIT_FIELDS = ['type', 'priority', 'payload', 'max_attempts'];

  const $ = (id) => document.getElementById(id);

  const state = {
    token: '',
    timer: 0,
    running: false, // a refresh is in flight
    again: false, // another refresh was asked for meanwhile
    selected: '', // id of the task shown in the detail panel
    task: null, // that task, as last loaded
    errors: new Map(), // banner messages by key
    errorSeq: 0,
    live: null, // AbortController of the open event stream
    liveLast: 0, // when a live event last refreshed the page
    livePending: 0, // timer of a live refresh put off by LIVE_MIN_MS
  };

  // ---- API ---------------------------------------------------------------

  class APIError extends Error {
    constructor(status, code, message, field, retryAfter) {
      super(message);
      this.status = status;
      this.code = code;
      this.field = field || '';
      this.retryAfter = retryAfter || '';
    }
  }

  // api calls /api/v1/<path> and returns the decoded JSON body. Any failure
  // is thrown as an APIError that carries the API's {"error":{...}} fields.
  // The path is relative so the page also works behind a path prefix.
  async function api(method, path, bodyText) {
    const token = state.token;
    const headers = { Authorization: 'Bearer ' + token, Accept: 'application/json' };
    const init = { method, headers, cache: 'no-store', credentials: 'omit' };
    if (bodyText !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = bodyText;
    }
    let res;
    try {
      res = await fetch('api/v1/' + path, init);
    } catch (e) {
      throw new APIError(0, 'network', 'cannot reach the API (' + (e && e.message ? e.message : e) + ')');
    }
    const text = await res.text();
    let data = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch (e) {
        data = null;
      }
    }
    if (!res.ok) {
      const e = data && typeof data === 'object' && data.error ? data.error : null;
      const message = e && e.message ? e.message : (text.trim().slice(0, 300) || res.statusText || 'request failed');
      const err = new APIError(res.status, e && e.code ? e.code : 'http_' + res.status, message,
        e && e.field, res.headers.get('Retry-After'));
      if (res.status === 401 && token === state.token) {
        signOut('The API rejected the token (' + message + '). Enter a valid token.');
      }
      throw err;
    }
    if (text && data === null) {
      throw new APIError(res.status, 'bad_response', 'the API answered ' + method + ' ' + path + ' with a body that is not JSON');
    }
    return data;
  }

  function describe(err) {
    if (!(err instanceof APIError)) {
      return String(err && err.message ? err.message : err);
    }
    let s = err.message;
    if (err.field && !s.startsWith(err.field)) s = err.field + ': ' + s;
    if (err.status) s += ' (' + err.status + ' ' + err.code + ')';
    if (err.retryAfter) s += '; retry after ' + err.retryAfter + ' s';
    return s;
  }

  // ---- banner ------------------------------------------------------------

  // report shows an error in the banner. A key replaces the previous message
  // with the same key (refresh errors); without one every error stays until
  // the operator dismisses the banner. 401s are not repeated there: the
  // token form says it.
  function report(what, err, key) {
    if (err instanceof APIError && err.status === 401) return;
    state.errors.set(key || 'e' + (++state.errorSeq), what + ': ' + describe(err));
    renderBanner();
  }

  function clearError(key) {
    if (state.errors.delete(key)) renderBanner();
  }

  function renderBanner() {
    const list = $('banner-list');
    list.replaceChildren();
    for (const msg of state.errors.values()) {
      const li = document.createElement('li');
      li.textContent = msg;
      list.append(li);
    }
    $('banner').hidden = state.errors.size === 0;
  }

  // ---- token -------------------------------------------------------------

  // tokenFromFragment takes token=... out of the URL fragment and removes it
  // from the address bar and the history entry.
  function tokenFromFragment() {
    const hash = location.hash.replace(/^#/, '');
    if (!hash) return '';
    let token = '';
    const rest = [];
    for (const part of hash.split('&')) {
      if (part.startsWith('token=')) {
        try {
          token = decodeURIComponent(part.slice(6));
        } catch (e) {
          token = part.slice(6);
        }
      } else if (part) {
        rest.push(part);
      }
    }
    if (hash.includes('token=')) {
      history.replaceState(null, '', location.pathname + location.search + (rest.length ? '#' + rest.join('&') : ''));
    }
    return token.trim();
  }

  function storeToken(token) {
    try {
      if (token) sessionStorage.setItem(TOKEN_KEY, token);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch (e) {
      // Storage can be disabled; the token then lives in memory only.
    }
  }

  function storedToken() {
    try {
      return sessionStorage.getItem(TOKEN_KEY) || '';
    } catch (e) {
      return '';
    }
  }

  function useToken(token) {
    state.token = token;
    storeToken(token);
    $('login').hidden = true;
    $('app').hidden = false;
    $('session-actions').hidden = false;
    refreshNow();
    live(token);
  }

  function signOut(reason) {
    state.token = '';
    storeToken('');
    clearTimeout(state.timer);
    if (state.live) state.live.abort();
    closeDetail();
    $('app').hidden = true;
    $('session-actions').hidden = true;
    $('dispatch-state').hidden = true;
    $('updated').textContent = '';
    $('login-reason').textContent = reason ||
      'The dashboard calls the triage API with a bearer token. It keeps the token in this tab only.';
    $('login').hidden = false;
    $('token').value = '';
    $('token').focus();
  }

  // ---- live events ---------------------------------------------------------

  // Where the API runs as a long-lived server (triage dev), GET
  // /api/v1/events streams the tasks' lifecycle events: each one refreshes
  // the page at once (at most every LIVE_MIN_MS), on top of the 2 s poll.
  // The Lambda-hosted API answers 501, an API without the route 404: the
  // dashboard then only polls. EventSource cannot send the bearer token,
  // so the stream is read with fetch.
  async function live(token) {
    if (state.live) return;
    while (state.token === token) {
      const ctrl = new AbortController();
      state.live = ctrl;
      let res = null;
      try {
        res = await fetch('api/v1/events', {
          headers: { Authorization: 'Bearer ' + token, Accept: 'text/event-stream' },
          cache: 'no-store', credentials: 'omit', signal: ctrl.signal,
        });
      } catch (e) {
        res = null;
      }
      if (res && !res.ok && res.status !== 503) {
        state.live = null; // no event stream here (501, 404) or no access: poll only
        return;
      }
      if (res && res.ok && res.body) {
        $('live').textContent = 'live';
        try {
          await readEvents(res.body.getReader());
        } catch (e) {
          // the stream broke or was aborted: reopened below while signed in
        }
        $('live').textContent = '';
      }
      state.live = null;
      if (state.token !== token) return;
      await new Promise((resolve) => setTimeout(resolve, LIVE_RETRY_MS));
    }
  }

  // readEvents reads Server-Sent Events until the stream ends, refreshing
  // the page for each event (comments and keep-alives are ignored).
  async function readEvents(reader) {
    const decoder = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      let end;
      while ((end = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, end);
        buf = buf.slice(end + 2);
        if (/^data:/m.test(block)) liveRefresh();
      }
    }
  }

  function liveRefresh() {
    const wait = state.liveLast + LIVE_MIN_MS - Date.now();
    if (wait <= 0) {
      state.liveLast = Date.now();
      refreshNow();
    } else if (!state.livePending) {
      state.livePending = setTimeout(() => {
        state.livePending = 0;
        state.liveLast = Date.now();
        refreshNow();
      }, wait);
    }
  }

  // ---- refresh loop ------------------------------------------------------

  function refreshNow() {
    if (state.running) {
      state.again = true;
      return;
    }
    refresh();
  }

  async function refresh() {
    clearTimeout(state.timer);
    if (!state.token) return;
    state.running = true;
    state.again = false;
    try {
      const [stats, list, control] = await Promise.allSettled([
        api('GET', 'stats'),
        api('GET', 'tasks?' + listQuery()),
        api('GET', 'control'),
      ]);
      if (!state.token) return;
      settle('stats', stats, renderStats);
      settle('tasks', list, renderTasks);
      settle('control', control, renderControl);
      if (state.selected) await loadDetail(state.selected, true);
      $('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
    } finally {
      state.running = false;
      if (state.token) {
        if (state.again) refresh();
        else state.timer = setTimeout(tick, REFRESH_MS);
      }
    }
  }

  function settle(key, result, render) {
    if (result.status === 'fulfilled') {
      try {
        render(result.value || {});
        clearError('refresh-' + key);
      } catch (e) {
        report('Showing ' + key, e, 'refresh-' + key);
      }
    } else {
      report('Loading ' + key, result.reason, 'refresh-' + key);
    }
  }

  function tick() {
    if (document.hidden) {
      state.timer = setTimeout(tick, REFRESH_MS);
      return;
    }
    refreshNow();
  }

  // ---- rendering ---------------------------------------------------------

  function num(v) {
    return typeof v === 'number' && isFinite(v) ? v.toLocaleString() : '0';
  }

  function duration(seconds) {
    if (typeof seconds !== 'number' || !isFinite(seconds) || seconds <= 0) return '–';
    const s = Math.round(seconds);
    if (s < 60) return s + ' s';
    if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
    if (s < 86400) return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
    return Math.floor(s / 86400) + ' d ' + Math.floor((s % 86400) / 3600) + ' h';
  }

  function ago(iso) {
    const t = Date.parse(iso);
    if (!iso || isNaN(t)) return '–';
    const d = (Date.now() - t) / 1000;
    if (d < 5) return 'just now';
    return duration(d) + ' ago';
  }

  function renderStats(stats) {
    const queues = stats.queues || {};
    for (const p of PRIORITIES) {
      const q = queues[p] || {};
      const card = document.querySelector('[data-queue="' + p + '"]');
      for (const k of ['depth', 'in_flight', 'delayed', 'dlq_depth']) {
        card.querySelector('[data-k="' + k + '"]').textContent = num(q[k]);
      }
      card.querySelector('[data-k="oldest_age_seconds"]').textContent = duration(q.oldest_age_seconds);
      card.classList.toggle('has-dlq', (q.dlq_depth || 0) > 0);
    }
    const statuses = stats.statuses || {};
    for (const s of STATUSES) {
      document.querySelector('[data-status="' + s + '"]').textContent = num(statuses[s]);
    }
    const tp = stats.throughput || {};
    $('tp-completed').textContent = num(tp.completed_last_minute);
    $('tp-failed').textContent = num(tp.failed_last_minute);
  }

  function badge(cls, text) {
    const span = document.createElement('span');
    span.className = 'badge ' + cls;
    span.textContent = text;
    return span;
  }

  function cell(row, content, cls) {
    const td = document.createElement('td');
    if (cls) td.className = cls;
    if (content instanceof Node) td.append(content);
    else td.textContent = content;
    row.append(td);
    return td;
  }

  function renderTasks(body) {
    const tasks = Array.isArray(body.tasks) ? body.tasks : [];
    const tbody = $('tasks-body');
    const focused = document.activeElement && document.activeElement.dataset
      ? document.activeElement.dataset.open : '';
    const rows = [];
    for (const t of tasks) {
      const tr = document.createElement('tr');
      tr.dataset.id = t.id;
      if (t.id === state.selected) {
        tr.classList.add('selected');
        tr.setAttribute('aria-selected', 'true');
      }
      const open = document.createElement('button');
      open.type = 'button';
      open.className = 'link';
      open.dataset.open = t.id;
      open.textContent = t.id;
      open.setAttribute('aria-label', 'Show task ' + t.id);
      cell(tr, open, 'id');
      cell(tr, t.type || '');
      const prio = document.createElement('span');
      prio.append(badge('prio-' + t.priority, t.priority || '?'));
      if (t.effective_priority && t.effective_priority !== t.priority) {
        const arrow = document.createElement('span');
        arrow.className = 'promoted';
        arrow.textContent = '→';
        arrow.title = 'promoted: effective priority';
        prio.append(arrow, badge('prio-' + t.effective_priority, t.effective_priority));
        prio.title = 'submitted ' + t.priority + ', now ' + t.effective_priority;
      }
      cell(tr, prio);
      // A task delayed by 15 min or less is queued, hidden on its queue
      // until run_at; a longer delay is scheduled. Both say when they run.
      const delayed = t.status === 'queued' && t.run_at && Date.parse(t.run_at) > Date.now();
      const st = badge('status-' + t.status, delayed ? 'queued · delayed' : (t.status || '?'));
      if (t.run_at && (delayed || t.status === 'scheduled')) st.title = 'runs at ' + t.run_at;
      if (t.cancel_requested) st.title = 'cancel requested';
      cell(tr, st);
      cell(tr, (t.attempts || 0) + ' / ' + (t.max_attempts || '?'), 'num');
      const created = cell(tr, ago(t.created_at));
      created.title = t.created_at || '';
      rows.push(tr);
    }
    if (rows.length === 0) {
      const tr = document.createElement('tr');
      tr.className = 'empty';
      const td = cell(tr, filtersActive() ? 'No tasks match the filters.' : 'No tasks yet.');
      td.colSpan = 6;
      rows.push(tr);
    }
    tbody.replaceChildren(...rows);
    $('tasks-count').textContent = tasks.length + (body.next_cursor ? '+' : '') +
      (tasks.length === 1 ? ' task' : ' tasks') + (body.next_cursor ? ' (first ' + LIST_LIMIT + ' shown)' : '');
    if (focused) {
      const again = tbody.querySelector('button[data-open="' + CSS.escape(focused) + '"]');
      if (again) again.focus();
    }
  }

  function renderControl(body) {
    const controls = Array.isArray(body.controls) ? body.controls : [body];
    const global = controls.find((c) => c && !c.type) || {};
    setPaused(!!global.paused, controls.filter((c) => c && c.type && c.paused).map((c) => c.type));
  }

  function setPaused(paused, pausedTypes) {
    const pill = $('dispatch-state');
    pill.hidden = false;
    pill.classList.toggle('paused', paused);
    let text = paused ? 'Dispatch paused' : 'Dispatch running';
    if (pausedTypes && pausedTypes.length) text += ' · paused types: ' + pausedTypes.join(', ');
    pill.textContent = text;
    $('pause').disabled = paused;
    $('resume').disabled = !paused;
  }

  // ---- filters -----------------------------------------------------------

  function listQuery() {
    const q = new URLSearchParams();
    q.set('limit', String(LIST_LIMIT));
    const status = $('filter-status').value;
    const priority = $('filter-priority').value;
    const type = $('filter-type').value.trim();
    if (status) q.set('status', status);
    if (priority) q.set('priority', priority);
    if (type) q.set('type', type);
    return q.toString();
  }

  function filtersActive() {
    return !!($('filter-status').value || $('filter-priority').value || $('filter-type').value.trim());
  }

  // ---- task detail -------------------------------------------------------

  function openTask(id) {
    if (!id) return;
    state.selected = id;
    state.task = null;
    $('detail').hidden = false;
    $('detail-id').textContent = id;
    $('detail-json').textContent = 'Loading…';
    $('detail-status').textContent = '';
    $('task-cancel').disabled = true;
    $('task-retry').disabled = true;
    for (const tr of document.querySelectorAll('#tasks-body tr[data-id]')) {
      const sel = tr.dataset.id === id;
      tr.classList.toggle('selected', sel);
      if (sel) tr.setAttribute('aria-selected', 'true');
      else tr.removeAttribute('aria-selected');
    }
    loadDetail(id, false);
  }

  function closeDetail() {
    state.selected = '';
    state.task = null;
    $('detail').hidden = true;
    for (const tr of document.querySelectorAll('#tasks-body tr.selected')) {
      tr.classList.remove('selected');
      tr.removeAttribute('aria-selected');
    }
  }

  async function loadDetail(id, quiet) {
    try {
      const task = await api('GET', 'tasks/' + encodeURIComponent(id));
      if (state.selected === id) showTask(task);
      clearError('detail');
    } catch (err) {
      if (state.selected !== id) return;
      report('Loading task ' + id, err, 'detail');
      if (err instanceof APIError && err.status === 404) closeDetail();
      else if (!quiet) $('detail-json').textContent = 'Could not load the task: ' + describe(err);
    }
  }

  function showTask(task) {
    state.task = task;
    const pre = $('detail-json');
    const text = JSON.stringify(task, null, 2);
    if (pre.textContent !== text) pre.textContent = text;
    const prog = task.progress;
    $('detail-progress').hidden = !prog;
    if (prog) {
      $('detail-progress-bar').value = prog.percent;
      $('detail-progress-text').textContent = prog.percent + '%' + (prog.message ? ' ' + prog.message : '') +
        ' (attempt ' + prog.attempt + ')';
    }
    const status = task.status || '';
    const cancel = $('task-cancel');
    cancel.disabled = TERMINAL.has(status) || !!task.cancel_requested;
    cancel.title = cancel.disabled ? (task.cancel_requested ? 'cancel already requested' : 'the task has finished') : '';
    const retry = $('task-retry');
    retry.disabled = !RETRIABLE.has(status);
    retry.title = retry.disabled ? 'only a dead_letter task can be retried' : '';
  }

  async function taskAction(action, button) {
    const id = state.selected;
    if (!id) return;
    button.disabled = true;
    $('detail-status').textContent = action === 'cancel' ? 'Cancelling…' : 'Retrying…';
    try {
      const task = await api('POST', 'tasks/' + encodeURIComponent(id) + '/' + action);
      if (state.selected === id) showTask(task);
      $('detail-status').textContent = action === 'cancel'
        ? (task.cancel_requested && task.status !== 'cancelled' ? 'Cancel requested' : 'Cancelled')
        : 'Queued again';
      refreshNow();
    } catch (err) {
      $('detail-status').textContent = '';
      report((action === 'cancel' ? 'Cancel' : 'Retry') + ' task ' + id, err);
      if (state.task && state.selected === id) showTask(state.task);
      else button.disabled = false;
    }
  }

  // ---- submit ------------------------------------------------------------

  function fieldError(field, message) {
    const el = $('err-' + field);
    if (!el) return false;
    el.textContent = message;
    el.hidden = false;
    const input = document.querySelector('#submit-form [name="' + field + '"]');
    if (input) input.setAttribute('aria-invalid', 'true');
    return true;
  }

  function clearFieldErrors() {
    for (const f of SUBMIT_FIELDS) {
      const el = $('err-' + f);
      el.textContent = '';
      el.hidden = true;
      const input = document.querySelector('#submit-form [name="' + f + '"]');
      if (input) input.removeAttribute('aria-invalid');
    }
    const status = $('submit-status');
    status.textContent = '';
    status.className = 'small';
  }

  function submitStatus(text, ok) {
    const status = $('submit-status');
    status.textContent = text;
    status.className = 'small ' + (ok ? 'ok' : 'err');
  }

  function focusField(field) {
    const input = document.querySelector('#submit-form [name="' + field + '"]');
    if (input) input.focus();
  }

  async function submitTask(ev) {
    ev.preventDefault();
    clearFieldErrors();
    const body = { type: $('f-type').value.trim(), priority: $('f-priority').value };
    const maxAttempts = $('f-max-attempts').value.trim();
    if (maxAttempts) {
      const n = Number(maxAttempts);
      if (!Number.isInteger(n)) {
        fieldError('max_attempts', 'must be a whole number');
        submitStatus('Not submitted: fix the marked field.', false);
        focusField('max_attempts');
        return;
      }
      body.max_attempts = n;
    }
    // The payload is sent as typed, not re-encoded, so large numbers and
    // key order survive; it is only parsed here to check that it is JSON.
    const payload = $('f-payload').value.trim();
    let bodyText = JSON.stringify(body);
    if (payload) {
      try {
        JSON.parse(payload);
      } catch (e) {
        fieldError('payload', 'is not valid JSON: ' + e.message);
        submitStatus('Not submitted: fix the marked field.', false);
        focusField('payload');
        return;
      }
      bodyText = bodyText.slice(0, -1) + ',"payload":' + payload + '}';
    }
    const button = $('submit-button');
    button.disabled = true;
    try {
      const task = await api('POST', 'tasks', bodyText);
      submitStatus('Submitted ' + task.id + ' (' + task.status + ').', true);
      refreshNow();
    } catch (err) {
      if (err instanceof APIError && err.field && fieldError(err.field, err.message)) {
        submitStatus('Not submitted: fix the marked field.', false);
        focusField(err.field);
      } else {
        submitStatus('Not submitted: ' + describe(err), false);
        report('Submit task', err);
      }
    } finally {
      button.disabled = false;
    }
  }

  // ---- dispatch control --------------------------------------------------

  async function control(action) {
    const button = $(action);
    button.disabled = true;
    try {
      const c = await api('POST', 'control/' + action);
      setPaused(!!c.paused);
      refreshNow();
    } catch (err) {
      report(action === 'pause' ? 'Pause dispatch' : 'Resume dispatch', err);
      button.disabled = false;
    }
  }

  // ---- wiring ------------------------------------------------------------

  function start() {
    $('login-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const token = $('token').value.trim();
      if (!token) {
        $('login-reason').textContent = 'Enter a token.';
        $('token').focus();
        return;
      }
      $('token').value = '';
      useToken(token);
    });
    $('signout').addEventListener('click', () => signOut(''));
    $('banner-close').addEventListener('click', () => {
      state.errors.clear();
      renderBanner();
    });
    $('pause').addEventListener('click', () => control('pause'));
    $('resume').addEventListener('click', () => control('resume'));

    $('filters').addEventListener('submit', (ev) => {
      ev.preventDefault();
      refreshNow();
    });
    $('filter-status').addEventListener('change', refreshNow);
    $('filter-priority').addEventListener('change', refreshNow);
    let typeTimer = 0;
    $('filter-type').addEventListener('input', () => {
      clearTimeout(typeTimer);
      typeTimer = setTimeout(refreshNow, 300);
    });

    $('tasks-body').addEventListener('click', (ev) => {
      const tr = ev.target.closest('tr[data-id]');
      if (tr) openTask(tr.dataset.id);
    });
    $('detail-close').addEventListener('click', closeDetail);
    $('task-cancel').addEventListener('click', () => taskAction('cancel', $('task-cancel')));
    $('task-retry').addEventListener('click', () => taskAction('retry', $('task-retry')));
    $('submit-form').addEventListener('submit', submitTask);

    document.addEventListener('visibilitychange', () => {
      if (!document.hidden && state.token) refreshNow();
    });
    window.addEventListener('hashchange', () => {
      const token = tokenFromFragment();
      if (token) useToken(token);
    });

    const token = tokenFromFragment() || storedToken();
    if (token) useToken(token);
    else signOut('');
  }

  start();
})();
