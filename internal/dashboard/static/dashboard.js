// triage dashboard: talks to /api/v1 with the operator's bearer token.
// Plain JavaScript with no dependencies; every value from the API is put on
// the page with textContent, never as HTML.
(() => {
  'use strict';

  const TOKEN_KEY = 'triage.token';
  const REFRESH_MS = 2000;
  const LIVE_MIN_MS = 300; // live events refresh the page at most this often
  const LIST_FILLS = 4; // GET /tasks calls at most to fill one page of a filtered list
  const LIVE_RETRY_MS = 5000; // a broken event stream is reopened after this
  const BULK_CONCURRENCY = 4; // bulk actions keep at most this many requests in flight
  const PRIORITIES = ['high', 'medium', 'low'];
  const STATUSES = ['scheduled', 'queued', 'executing', 'retrying', 'completed', 'cancelled', 'dead_letter'];
  const TERMINAL = new Set(['completed', 'cancelled', 'dead_letter']);
  // Only a dead-lettered task can be retried: the API answers 409 for any
  // other status, a cancelled one included (it finished as asked).
  const RETRIABLE = new Set(['dead_letter']);
  const SUBMIT_FIELDS = ['type', 'priority', 'payload', 'max_attempts'];
  const ID_RE = /^[0-9A-HJKMNP-TV-Z]{26}$/i; // a ULID, as the API checks it

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
    view: 'tasks', // the tab shown: tasks or dlq
    // Paging: cursors[i] is the cursor of page i (cursors[0] is ''); the
    // API gives next_cursor only, so "newer" goes back along this list.
    cursors: [''],
    page: 0,
    next: '', // next_cursor of the page shown
    lookup: '', // a task id looked up: the list shows that task alone
    tasks: [], // the page shown
    checked: new Set(), // ids selected for a bulk action
    types: [], // known task types, from /stats
    dlq: [], // dead letters listed
    dlqChecked: new Set(), // task ids selected in the dead letters
    dlqRunning: false, // a dead-letter listing is in flight
    bodies: new Map(), // payload/result fetched on demand, by task id
    controls: [], // GET /control's settings
    rateUse: {}, // and its rate use per type
    executing: {}, // executing tasks per type, from /stats
    depth: [], // queue depth samples {at, high, medium, low}, the last hour
    depthHist: [], // the promoter's samples, one a minute (GET /stats/history)
    slowAt: 0, // when the slow panels (history, failures) were last read
    slowRunning: false, // a slow-panel read is in flight
    workersRunning: false, // a GET /workers is in flight
    aging: null, // the promoter's schedule (GET /aging), read once
  };
  const SLOW_MS = 10000; // the history and recent failures change slowly
  const HOUR_MS = 3600 * 1000;

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
    loadAging();
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

  // refresh reloads what the page shows: /stats (constant cost), one page
  // of tasks (O(page)), the controls, the open task, and the dead letters
  // when their tab is shown. One refresh is in flight at a time; a call
  // meanwhile asks for one more afterwards.
  async function refresh() {
    clearTimeout(state.timer);
    if (!state.token) return;
    state.running = true;
    state.again = false;
    // Marks the page as refreshing (tests wait for it to settle).
    document.body.dataset.refreshing = '1';
    try {
      const [stats, list, control] = await Promise.allSettled([
        api('GET', 'stats'),
        loadList(),
        api('GET', 'control'),
      ]);
      if (!state.token) return;
      settle('stats', stats, renderStats);
      settle('tasks', list, renderTasks);
      settle('control', control, renderControl);
      if (state.selected) await loadDetail(state.selected, true);
      if (state.view === 'dlq') await loadDLQ(true);
      if (state.view === 'workers') await loadWorkers();
      loadSlow(false);
      $('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
    } finally {
      state.running = false;
      if (!state.again || !state.token) delete document.body.dataset.refreshing;
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
    if (seconds < 10) return (Math.round(seconds * 10) / 10) + ' s';
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
    if (d < 0) return 'in ' + duration(-d);
    if (d < 5) return 'just now';
    return duration(d) + ' ago';
  }

  // when is a relative time with the absolute one on hover.
  function when(iso) {
    const span = document.createElement('time');
    span.textContent = ago(iso);
    if (iso) {
      span.dateTime = iso;
      span.title = new Date(iso).toLocaleString() + ' (' + iso + ')';
    }
    return span;
  }

  function bytes(n) {
    if (!n) return '0 B';
    if (n < 1024) return n + ' B';
    if (n < 1024 * 1024) return (n / 1024).toFixed(1) + ' KiB';
    return (n / 1024 / 1024).toFixed(2) + ' MiB';
  }

  function renderStats(stats) {
    const queues = stats.queues || {};
    let dlq = 0;
    for (const p of PRIORITIES) {
      const q = queues[p] || {};
      const card = document.querySelector('[data-queue="' + p + '"]');
      for (const k of ['depth', 'in_flight', 'delayed', 'dlq_depth']) {
        card.querySelector('[data-k="' + k + '"]').textContent = num(q[k]);
      }
      card.querySelector('[data-k="oldest_age_seconds"]').textContent = duration(q.oldest_age_seconds);
      renderWait(card.querySelector('[data-k="wait"]'), q);
      renderAging(card, p, q.depth ? q.oldest_age_seconds || 0 : 0);
      card.classList.toggle('has-dlq', (q.dlq_depth || 0) > 0);
      dlq += q.dlq_depth || 0;
    }
    $('tab-dlq-count').textContent = dlq ? String(dlq) : '';
    const ws = stats.workers;
    $('tab-workers-count').textContent = ws ? String(ws.active || 0) + (ws.dead ? ' · ' + ws.dead + ' dead' : '') : '';
    const statuses = stats.statuses || {};
    for (const s of STATUSES) {
      document.querySelector('[data-status="' + s + '"]').textContent = num(statuses[s]);
    }
    const tp = stats.throughput || {};
    $('tp-completed').textContent = num(tp.completed_last_minute);
    $('tp-failed').textContent = num(tp.failed_last_minute);
    state.executing = {};
    for (const [typ, counts] of Object.entries(stats.types || {})) state.executing[typ] = (counts || {}).executing || 0;
    sampleDepth(queues);
    renderStatusChart(statuses);
    renderTypeChart(stats.types || {});
    const types = Object.keys(stats.types || {}).sort();
    if (types.join('\n') !== state.types.join('\n')) {
      state.types = types;
      for (const id of ['filter-type', 'dlq-type']) fillTypes($(id), types);
    }
  }

  // fillTypes keeps a type dropdown's options the known types, keeping
  // the chosen one even if it has no tasks left.
  function fillTypes(sel, types) {
    const cur = sel.value;
    const opts = [new Option('any', '')];
    const all = cur && !types.includes(cur) ? types.concat([cur]).sort() : types;
    for (const t of all) opts.push(new Option(t, t));
    sel.replaceChildren(...opts);
    sel.value = cur;
  }

  // renderWait shows the wait percentiles of the tasks of one priority
  // that started in the last 5 minutes (from the counters' histograms:
  // each an upper bound within a factor of 2).
  function renderWait(dd, q) {
    if (!dd) return;
    if (!q.waits) {
      dd.textContent = '–';
      delete dd.dataset.p50;
      delete dd.dataset.p99;
      return;
    }
    dd.textContent = waitText(q.wait_p50_seconds) + ' / ' + waitText(q.wait_p99_seconds);
    dd.dataset.p50 = String(q.wait_p50_seconds);
    dd.dataset.p99 = String(q.wait_p99_seconds);
    dd.dataset.waits = String(q.waits);
    dd.title = q.waits.toLocaleString() + ' started in the last 5 min; half waited at most ' + waitText(q.wait_p50_seconds).slice(2) +
      ', 99% at most ' + waitText(q.wait_p99_seconds).slice(2);
  }

  function waitText(seconds) {
    if (typeof seconds !== 'number' || !isFinite(seconds)) return '–';
    // Rounded up: each is a bound.
    if (seconds < 1) return '≤ ' + Math.ceil(seconds * 1000) + ' ms';
    if (seconds < 10) return '≤ ' + (Math.ceil(seconds * 10) / 10) + ' s';
    return '≤ ' + duration(Math.ceil(seconds));
  }

  // renderAging says how far the oldest waiting task of priority p is
  // from its next promotion and (low) from the starvation bound, from the
  // promoter's schedule. The oldest age is an upper bound to the minute,
  // so "due" may come up to a minute early.
  function renderAging(card, p, oldest) {
    const a = state.aging;
    const promo = card.querySelector('[data-k="promotion"]');
    if (!promo) return;
    const after = p === 'low' ? a && a.low_after_seconds : a && a.medium_after_seconds;
    const next = p === 'low' ? 'medium' : 'high';
    if (!a) {
      promo.textContent = '–';
    } else if (!oldest) {
      promo.textContent = 'after ' + duration(after) + ' waiting';
    } else {
      promo.textContent = oldest >= after ? 'due (to ' + next + ')' : 'in ' + duration(after - oldest);
    }
    const bound = card.querySelector('[data-k="bound"]');
    if (bound) {
      bound.textContent = !a ? '–' : (oldest ? duration(Math.max(a.starvation_bound_seconds - oldest, 0)) + ' left' : duration(a.starvation_bound_seconds));
      bound.title = a ? 'a task reaches the high queue within ' + duration(a.starvation_bound_seconds) + ' of waiting (low after + medium after + 2 promoter runs)' : '';
    }
  }

  async function loadAging() {
    try {
      state.aging = await api('GET', 'aging');
    } catch (err) {
      state.aging = null; // 501: the API does not know the schedule
    }
  }

  function badge(cls, text) {
    const span = document.createElement('span');
    span.className = 'badge ' + cls;
    span.textContent = text;
    return span;
  }

  // statusBadge marks a status by colour and by a symbol, so it reads
  // without colour too.
  const STATUS_MARK = { scheduled: '◷', queued: '○', executing: '▶', retrying: '↻', completed: '✓', cancelled: '⊘', dead_letter: '✕' };
  function statusBadge(t) {
    const delayed = t.status === 'queued' && t.run_at && Date.parse(t.run_at) > Date.now();
    const text = (STATUS_MARK[t.status] || '?') + ' ' + (delayed ? 'queued · delayed' : (t.status || '?'));
    const st = badge('status-' + t.status, text);
    if (t.run_at && (delayed || t.status === 'scheduled')) st.title = 'runs at ' + t.run_at;
    if (t.cancel_requested) st.title = 'cancel requested';
    return st;
  }

  function prioBadges(t) {
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
    return prio;
  }

  function cell(row, content, cls) {
    const td = document.createElement('td');
    if (cls) td.className = cls;
    if (content instanceof Node) td.append(content);
    else td.textContent = content;
    row.append(td);
    return td;
  }

  // What the API allows, per task: the buttons offer exactly these.
  const can = {
    retry: (t) => t.status === 'dead_letter',
    cancel: (t) => !TERMINAL.has(t.status) && !t.cancel_requested,
    delete: (t) => TERMINAL.has(t.status),
  };

  // taskDuration is how long the task ran: start to finish, or to now
  // while it runs.
  function taskDuration(t) {
    if (!t.started_at) return '–';
    const start = Date.parse(t.started_at);
    const end = t.completed_at ? Date.parse(t.completed_at) : (t.status === 'executing' ? Date.now() : NaN);
    return isNaN(end) ? '–' : duration(Math.max(end - start, 1) / 1000);
  }

  function actionButton(action, t) {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = action === 'retry' ? 'small-btn' : 'small-btn danger';
    b.dataset.action = action;
    b.dataset.id = t.id;
    b.textContent = action[0].toUpperCase() + action.slice(1);
    b.setAttribute('aria-label', b.textContent + ' task ' + t.id);
    b.disabled = !can[action](t);
    return b;
  }

  function renderTasks(body) {
    const tasks = Array.isArray(body.tasks) ? body.tasks : [];
    state.tasks = tasks;
    state.next = body.next_cursor || '';
    const tbody = $('tasks-body');
    const focused = document.activeElement && document.activeElement.dataset
      ? document.activeElement.dataset.open : '';
    const rows = [];
    const ids = new Set(tasks.map((t) => t.id));
    for (const id of [...state.checked]) if (!ids.has(id)) state.checked.delete(id);
    for (const t of tasks) {
      const tr = document.createElement('tr');
      tr.dataset.id = t.id;
      if (t.id === state.selected) {
        tr.classList.add('selected');
        tr.setAttribute('aria-selected', 'true');
      }
      const box = document.createElement('input');
      box.type = 'checkbox';
      box.dataset.check = t.id;
      box.checked = state.checked.has(t.id);
      box.setAttribute('aria-label', 'Select task ' + t.id);
      cell(tr, box, 'check');
      const open = document.createElement('button');
      open.type = 'button';
      open.className = 'link';
      open.dataset.open = t.id;
      open.textContent = t.id;
      open.setAttribute('aria-label', 'Show task ' + t.id);
      cell(tr, open, 'id');
      cell(tr, t.type || '');
      cell(tr, prioBadges(t));
      cell(tr, statusBadge(t));
      cell(tr, (t.attempts || 0) + ' / ' + (t.max_attempts || '?'), 'num');
      cell(tr, when(t.created_at));
      cell(tr, t.started_at ? when(t.started_at) : '–');
      cell(tr, taskDuration(t), 'num');
      const acts = document.createElement('span');
      acts.className = 'row-actions';
      acts.append(actionButton('retry', t), actionButton('cancel', t), actionButton('delete', t));
      cell(tr, acts);
      rows.push(tr);
    }
    if (rows.length === 0) {
      const tr = document.createElement('tr');
      tr.className = 'empty';
      const td = cell(tr, state.lookup ? 'No task with id ' + state.lookup + '.'
        : (state.next ? 'No matching tasks in this stretch; try Older →.'
          : (filtersActive() ? 'No tasks match the filters.' : 'No tasks yet.')));
      td.colSpan = 10;
      rows.push(tr);
    }
    tbody.replaceChildren(...rows);
    // For the 10,000-task bound (e2e scale test): when each page render
    // lands, on the page's own clock.
    if (window.performance && performance.mark) performance.mark('tasks-painted');
    const n = tasks.length;
    $('tasks-count').textContent = state.lookup ? 'task ' + state.lookup
      : n + (n === 1 ? ' task' : ' tasks') + ' on this page' + (state.next ? ', more older' : '');
    $('page-info').textContent = state.lookup ? 'lookup' : 'page ' + (state.page + 1);
    $('page-prev').disabled = state.page === 0 && !state.lookup;
    $('page-next').disabled = !state.next || !!state.lookup;
    renderBulk();
    if (focused) {
      const again = tbody.querySelector('button[data-open="' + CSS.escape(focused) + '"]');
      if (again) again.focus();
    }
  }

  function renderBulk() {
    const chosen = state.tasks.filter((t) => state.checked.has(t.id));
    $('bulk-count').textContent = chosen.length + ' selected';
    for (const a of ['retry', 'cancel', 'delete']) {
      const n = chosen.filter(can[a]).length;
      const b = $('bulk-' + a);
      b.disabled = n === 0;
      if (!b.dataset.armed) b.textContent = a[0].toUpperCase() + a.slice(1) + (n ? ' ' + n : '');
    }
    const all = $('select-all');
    all.checked = chosen.length > 0 && chosen.length === state.tasks.length;
    all.indeterminate = chosen.length > 0 && chosen.length < state.tasks.length;
  }

  function renderControl(body) {
    const controls = Array.isArray(body.controls) ? body.controls : [body];
    const global = controls.find((c) => c && !c.type) || {};
    setPaused(!!global.paused, controls.filter((c) => c && c.type && c.paused).map((c) => c.type));
    state.controls = controls.filter((c) => c && c.type);
    state.rateUse = body.rate_use || {};
    renderControlRows();
  }

  // renderControlRows shows a row per known type (from /stats) and per
  // type with settings. Rows are kept and updated in place, and an input
  // the operator has edited keeps its value until saved.
  function renderControlRows() {
    const tbody = $('controls-body');
    const byType = new Map(state.controls.map((c) => [c.type, c]));
    const types = [...new Set(state.types.concat([...byType.keys()]))].sort();
    const global = document.getElementById('controls-global');
    global.textContent = $('dispatch-state').textContent;
    if (!types.length) {
      tbody.replaceChildren();
      const tr = document.createElement('tr');
      tr.className = 'empty';
      cell(tr, 'No task types yet.').colSpan = 7;
      tbody.append(tr);
      return;
    }
    const rows = [];
    for (const typ of types) {
      const c = byType.get(typ) || { type: typ, paused: false };
      let tr = tbody.querySelector('tr[data-type="' + CSS.escape(typ) + '"]');
      if (!tr) tr = controlRow(typ);
      const st = tr.querySelector('[data-k="state"]');
      st.replaceChildren(badge(c.paused ? 'status-cancelled' : 'status-completed', c.paused ? '⏸ paused' : '▶ running'));
      const toggle = tr.querySelector('button[data-toggle]');
      toggle.textContent = c.paused ? 'Resume' : 'Pause';
      toggle.dataset.toggle = c.paused ? 'resume' : 'pause';
      toggle.setAttribute('aria-label', toggle.textContent + ' type ' + typ);
      const rate = tr.querySelector('input[name="rate"]');
      const conc = tr.querySelector('input[name="concurrency"]');
      if (!rate.dataset.dirty && document.activeElement !== rate) rate.value = String(c.rate_limit_per_second || 0);
      if (!conc.dataset.dirty && document.activeElement !== conc) conc.value = String(c.max_concurrency || 0);
      const use = state.rateUse[typ];
      tr.querySelector('[data-k="rate_use"]').textContent = use
        ? use.starts + ' of ' + use.limit + ' in ' + (use.window_seconds === 1 ? 'this second' : 'this ' + use.window_seconds + ' s window') : '–';
      const ex = state.executing[typ] || 0;
      tr.querySelector('[data-k="executing"]').textContent = c.max_concurrency ? ex + ' of ' + c.max_concurrency : String(ex);
      rows.push(tr);
    }
    tbody.replaceChildren(...rows);
  }

  function controlRow(typ) {
    const tr = document.createElement('tr');
    tr.dataset.type = typ;
    cell(tr, code(typ));
    const stCell = cell(tr, '');
    const st = document.createElement('span');
    st.dataset.k = 'state';
    const toggle = document.createElement('button');
    toggle.type = 'button';
    toggle.className = 'small-btn';
    toggle.dataset.toggle = 'pause';
    stCell.append(st, ' ', toggle);
    for (const [name, label, step] of [['rate', 'rate limit per second', 'any'], ['concurrency', 'max concurrency', '1']]) {
      const input = document.createElement('input');
      input.type = 'number';
      input.min = '0';
      input.step = step;
      input.name = name;
      input.className = 'num-input';
      input.setAttribute('aria-label', typ + ' ' + label);
      input.addEventListener('input', () => { input.dataset.dirty = '1'; });
      cell(tr, input);
      const use = document.createElement('span');
      use.dataset.k = name === 'rate' ? 'rate_use' : 'executing';
      cell(tr, use, 'num');
    }
    const save = document.createElement('button');
    save.type = 'button';
    save.className = 'small-btn';
    save.dataset.save = typ;
    save.textContent = 'Save limits';
    save.setAttribute('aria-label', 'Save the limits of type ' + typ);
    const err = document.createElement('span');
    err.className = 'field-error';
    err.dataset.k = 'error';
    err.setAttribute('role', 'alert');
    cell(tr, save).append(' ', err);
    return tr;
  }

  async function saveLimits(typ, button) {
    const tr = button.closest('tr');
    const err = tr.querySelector('[data-k="error"]');
    err.textContent = '';
    const rate = tr.querySelector('input[name="rate"]');
    const conc = tr.querySelector('input[name="concurrency"]');
    const body = { rate_limit_per_second: Number(rate.value || 0), max_concurrency: Number(conc.value || 0) };
    if (!isFinite(body.rate_limit_per_second) || !Number.isInteger(body.max_concurrency)) {
      err.textContent = 'Enter numbers (max concurrency a whole number).';
      return;
    }
    button.disabled = true;
    try {
      await api('PUT', 'control/types/' + encodeURIComponent(typ), JSON.stringify(body));
      delete rate.dataset.dirty;
      delete conc.dataset.dirty;
      err.textContent = '';
      refreshNow();
    } catch (e) {
      err.textContent = describe(e); // inline, with the API's message and field
    } finally {
      button.disabled = false;
    }
  }

  async function toggleType(typ, action, button) {
    button.disabled = true;
    try {
      await api('POST', 'control/' + action + '?type=' + encodeURIComponent(typ));
      refreshNow();
    } catch (e) {
      button.closest('tr').querySelector('[data-k="error"]').textContent = describe(e);
    } finally {
      button.disabled = false;
    }
  }

  async function cleanup(ev) {
    ev.preventDefault();
    const button = $('cleanup-button');
    const age = Number($('cleanup-age').value);
    if (!armed(button, 'Really delete?')) return;
    const before = new Date(Date.now() - age * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
    const status = $('cleanup-status');
    status.textContent = 'Cleaning up…';
    button.disabled = true;
    try {
      // A cleanup is a job: started at once, done by the promoter; follow it.
      let job = await api('DELETE', 'tasks?older_than=' + encodeURIComponent(before));
      while (job.state !== 'done') {
        status.textContent = 'Cleaning up… ' + job.deleted + ' deleted so far (job ' + job.id + ').';
        await new Promise((resolve) => setTimeout(resolve, 1000));
        job = await api('GET', 'cleanups/' + encodeURIComponent(job.id));
      }
      status.textContent = 'Deleted ' + job.deleted + ' finished task(s) older than ' + before + '.';
      refreshNow();
    } catch (e) {
      status.textContent = 'Cleanup failed: ' + describe(e);
    } finally {
      button.disabled = false;
    }
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

  // ---- list, filters and paging -----------------------------------------

  function checkedStatuses() {
    return [...document.querySelectorAll('#filters input[name="status"]:checked')].map((i) => i.value);
  }

  function listQuery() {
    const q = new URLSearchParams();
    q.set('limit', $('page-size').value);
    const statuses = checkedStatuses();
    const priority = $('filter-priority').value;
    const type = $('filter-type').value;
    if (statuses.length) q.set('status', statuses.join(','));
    if (priority) q.set('priority', priority);
    if (type) q.set('type', type);
    const cursor = state.cursors[state.page];
    if (cursor) q.set('cursor', cursor);
    return q.toString();
  }

  // loadList reads the page shown: GET /tasks from the page's cursor
  // (O(page size)), or the looked-up task alone. A filter the indexes
  // cannot apply (a status mix, a priority, a type without the type index)
  // may give a short page with a cursor: the rest of the page is asked
  // for, at most LIST_FILLS calls in all, so a page shows a page's worth
  // of matches while a refresh stays bounded.
  async function loadList() {
    if (state.lookup) {
      try {
        return { tasks: [await api('GET', 'tasks/' + encodeURIComponent(state.lookup) + '?bodies=omit')] };
      } catch (err) {
        if (err instanceof APIError && err.status === 404) return { tasks: [] };
        throw err;
      }
    }
    const q = new URLSearchParams(listQuery());
    const limit = Number(q.get('limit')) || 25;
    const tasks = [];
    let body = { tasks: [] };
    for (let call = 0; call < LIST_FILLS; call++) {
      body = await api('GET', 'tasks?' + q.toString());
      if (Array.isArray(body.tasks)) tasks.push(...body.tasks);
      if (tasks.length >= limit || !body.next_cursor) break;
      q.set('limit', String(limit - tasks.length));
      q.set('cursor', body.next_cursor);
    }
    return { tasks, next_cursor: body.next_cursor || '' };
  }

  function filtersActive() {
    return !!(checkedStatuses().length || $('filter-priority').value || $('filter-type').value);
  }

  // resetPaging goes back to the newest page: filters changed.
  function resetPaging() {
    state.cursors = [''];
    state.page = 0;
    state.next = '';
    state.checked.clear();
    refreshNow();
  }

  function pageNext() {
    if (!state.next || state.lookup) return;
    state.cursors = state.cursors.slice(0, state.page + 1);
    state.cursors.push(state.next);
    state.page++;
    state.checked.clear();
    refreshNow();
  }

  function pagePrev() {
    if (state.lookup) {
      state.lookup = '';
      $('lookup-id').value = '';
    } else if (state.page > 0) {
      state.page--;
    }
    state.checked.clear();
    refreshNow();
  }

  function lookup(ev) {
    ev.preventDefault();
    const id = $('lookup-id').value.trim().toUpperCase();
    const err = $('lookup-error');
    if (id && !ID_RE.test(id)) {
      err.textContent = 'A task id is 26 letters and digits (a ULID).';
      err.hidden = false;
      $('lookup-id').setAttribute('aria-invalid', 'true');
      return;
    }
    err.hidden = true;
    $('lookup-id').removeAttribute('aria-invalid');
    state.lookup = id;
    state.checked.clear();
    if (id) openTask(id);
    refreshNow();
  }

  // ---- row and bulk actions ----------------------------------------------

  // armed makes a destructive button ask twice without a modal dialog:
  // the first press relabels it (for 4 s) and returns false, a second
  // press within that time returns true.
  function armed(button, question) {
    if (button.dataset.armed) {
      clearTimeout(Number(button.dataset.armed));
      delete button.dataset.armed;
      button.textContent = button.dataset.label;
      return true;
    }
    button.dataset.label = button.textContent;
    button.textContent = question;
    button.dataset.armed = String(setTimeout(() => {
      delete button.dataset.armed;
      button.textContent = button.dataset.label;
    }, 4000));
    return false;
  }

  async function act(action, id) {
    if (action === 'delete') return api('DELETE', 'tasks/' + encodeURIComponent(id));
    return api('POST', 'tasks/' + encodeURIComponent(id) + '/' + action);
  }

  async function rowAction(action, id, button) {
    button.disabled = true;
    try {
      await act(action, id);
      if (action === 'delete' && state.selected === id) closeDetail();
    } catch (err) {
      report(action[0].toUpperCase() + action.slice(1) + ' task ' + id, err);
    }
    refreshNow();
  }

  // bulk applies an action to the selected tasks it is allowed for, a few
  // requests at a time, and says how it went.
  async function bulk(action) {
    const ids = state.tasks.filter((t) => state.checked.has(t.id) && can[action](t)).map((t) => t.id);
    if (!ids.length) return;
    if (action === 'delete' && !armed($('bulk-delete'), 'Really delete ' + ids.length + '?')) return;
    const status = $('bulk-status');
    status.textContent = action + ': 0 of ' + ids.length;
    let done = 0;
    let failed = 0;
    const queue = ids.slice();
    const worker = async () => {
      while (queue.length) {
        const id = queue.shift();
        try {
          await act(action, id);
          done++;
        } catch (err) {
          failed++;
          report(action[0].toUpperCase() + action.slice(1) + ' task ' + id, err);
        }
        status.textContent = action + ': ' + (done + failed) + ' of ' + ids.length;
      }
    };
    await Promise.all(Array.from({ length: Math.min(BULK_CONCURRENCY, ids.length) }, worker));
    status.textContent = action + ': ' + done + ' done' + (failed ? ', ' + failed + ' failed' : '');
    state.checked.clear();
    refreshNow();
  }

  // ---- task detail -------------------------------------------------------

  function openTask(id) {
    if (!id) return;
    state.selected = id;
    state.task = null;
    $('detail').hidden = false;
    $('detail-id').textContent = id;
    $('detail-fields').replaceChildren(textNode('Loading…'));
    $('detail-timeline').replaceChildren();
    $('detail-steps').replaceChildren();
    $('detail-durable').hidden = true;
    $('detail-bodies').replaceChildren();
    $('detail-error').hidden = true;
    $('detail-status').textContent = '';
    $('task-cancel').disabled = true;
    $('task-retry').disabled = true;
    $('task-delete').disabled = true;
    for (const tr of document.querySelectorAll('#tasks-body tr[data-id]')) {
      const sel = tr.dataset.id === id;
      tr.classList.toggle('selected', sel);
      if (sel) tr.setAttribute('aria-selected', 'true');
      else tr.removeAttribute('aria-selected');
    }
    loadDetail(id, false);
  }

  function textNode(s) {
    const p = document.createElement('p');
    p.className = 'muted';
    p.textContent = s;
    return p;
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

  // loadDetail polls the open task without its off-record bodies
  // (bodies=omit): a large payload or result is read from S3 only when
  // the operator asks for it.
  async function loadDetail(id, quiet) {
    try {
      const task = await api('GET', 'tasks/' + encodeURIComponent(id) + '?bodies=omit');
      if (state.selected === id) showTask(task);
      clearError('detail');
    } catch (err) {
      if (state.selected !== id) return;
      report('Loading task ' + id, err, 'detail');
      if (err instanceof APIError && err.status === 404) closeDetail();
      else if (!quiet) $('detail-fields').replaceChildren(textNode('Could not load the task: ' + describe(err)));
    }
  }

  function field(dl, name, value, key) {
    const div = document.createElement('div');
    const dt = document.createElement('dt');
    dt.textContent = name;
    const dd = document.createElement('dd');
    if (key) dd.dataset.field = key;
    if (value instanceof Node) dd.append(value);
    else dd.textContent = value === undefined || value === null || value === '' ? '–' : String(value);
    div.append(dt, dd);
    dl.append(div);
  }

  function code(s) {
    const c = document.createElement('code');
    c.textContent = s;
    return c;
  }

  function showTask(task) {
    const sameTask = state.task && state.task.id === task.id;
    const before = sameTask ? JSON.stringify(state.task) : '';
    state.task = task;
    const status = task.status || '';
    const cancel = $('task-cancel');
    cancel.disabled = !can.cancel(task);
    cancel.title = cancel.disabled ? (task.cancel_requested ? 'cancel already requested' : 'the task has finished') : '';
    const retry = $('task-retry');
    retry.disabled = !can.retry(task);
    retry.title = retry.disabled ? 'only a dead_letter task can be retried' : '';
    const del = $('task-delete');
    del.disabled = !can.delete(task);
    del.title = del.disabled ? 'only a finished task can be deleted' : '';
    const prog = task.progress;
    $('detail-progress').hidden = !prog;
    if (prog) {
      $('detail-progress-bar').value = prog.percent;
      $('detail-progress-text').textContent = prog.percent + '%' + (prog.message ? ' ' + prog.message : '') +
        ' (attempt ' + prog.attempt + ')';
    }
    if (before === JSON.stringify(task)) return; // keep the viewers' open state
    const dl = $('detail-fields');
    dl.replaceChildren();
    field(dl, 'Status', statusBadge(task), 'status');
    field(dl, 'Type', code(task.type || ''), 'type');
    field(dl, 'Priority', prioBadges(task), 'priority');
    field(dl, 'Attempts', (task.attempts || 0) + ' of ' + (task.max_attempts || '?'), 'attempts');
    field(dl, 'Timeout', task.timeout_seconds ? duration(task.timeout_seconds) : '', 'timeout');
    field(dl, 'Created', task.created_at ? when(task.created_at) : '', 'created_at');
    if (task.run_at) field(dl, 'Runs at', when(task.run_at), 'run_at');
    if (task.enqueued_at) field(dl, 'Queued', when(task.enqueued_at), 'enqueued_at');
    field(dl, 'Started', task.started_at ? when(task.started_at) : '', 'started_at');
    field(dl, 'Finished', task.completed_at ? when(task.completed_at) : '', 'completed_at');
    field(dl, 'Duration', taskDuration(task), 'duration');
    if (task.retry_at) field(dl, 'Next attempt', when(task.retry_at), 'retry_at');
    if (task.cancel_requested) field(dl, 'Cancel', 'requested', 'cancel_requested');
    if (task.suspended) {
      const sus = document.createElement('span');
      sus.append(task.suspended.kind === 'wait' ? 'waiting for signal ' : 'sleeping', task.suspended.kind === 'wait' ? code(task.suspended.signal || '') : '',
        ' until ', when(task.suspended.wake_at));
      field(dl, 'Suspended', sus, 'suspended');
    }
    field(dl, 'Trace id', task.trace_id ? code(task.trace_id) : '', 'trace_id');
    if (task.idempotency_key) field(dl, 'Idempotency key', code(task.idempotency_key), 'idempotency_key');
    const errBox = $('detail-error');
    errBox.hidden = !task.error;
    if (task.error) {
      errBox.textContent = (task.error.retriable ? 'Error (retriable): ' : 'Error (permanent): ') + task.error.message;
    }
    renderTimeline(task);
    renderSteps(task);
    renderBodies(task);
  }

  // renderSteps lists the task's durable life in the order its handler met
  // it: each run step with its outcome, duration and result size; each
  // sleep with its wake time; each signal wait with its timeout and, once
  // consumed, the signal's arrival (or its timeout); then the signals that
  // arrived with no wait for them yet.
  function renderSteps(task) {
    const ol = $('detail-steps');
    ol.replaceChildren();
    const steps = Array.isArray(task.steps) ? task.steps.slice().sort((a, b) => a.seq - b.seq) : [];
    const signals = Array.isArray(task.signals) ? task.signals : [];
    const arrived = new Map(signals.map((sg) => [sg.name, sg]));
    const waitedFor = new Set();
    const sus = task.suspended;
    const item = (kind, name, outcome, mark, title) => {
      const li = document.createElement('li');
      li.className = 'attempt step ' + (outcome === 'error' || outcome === 'timed_out' ? 'failed' : 'ok');
      li.dataset.kind = kind;
      li.dataset.step = name;
      const head = document.createElement('div');
      head.className = 'attempt-head';
      const m = document.createElement('span');
      m.className = 'mark';
      m.textContent = mark;
      const t = document.createElement('strong');
      t.append(...title);
      const out = document.createElement('span');
      out.className = 'outcome';
      out.dataset.outcome = outcome;
      out.textContent = outcome.replace('_', ' ');
      head.append(m, ' ', t, ' ', out);
      const meta = document.createElement('div');
      meta.className = 'small muted';
      li.append(head, meta);
      ol.append(li);
      return meta;
    };
    for (const st of steps) {
      const n = (st.seq || 0) + 1;
      if (st.kind === 'run') {
        const meta = item('run', st.name, st.outcome || (st.error ? 'error' : 'ok'), st.error ? '✕' : '✓', [n + '. ', code(st.name)]);
        const ms = st.duration_ms || 0;
        meta.append(when(st.at), ' · ran ' + (ms < 1000 ? ms + ' ms' : duration(ms / 1000)) +
          ' · result ' + bytes(st.result_size) + ' · attempt ' + st.attempt);
        meta.dataset.duration = String(ms);
        if (st.error) {
          const e = document.createElement('div');
          e.className = 'attempt-error';
          e.dataset.error = '';
          e.textContent = st.error;
          meta.after(e);
        }
      } else if (st.kind === 'sleep') {
        const asleep = sus && sus.kind === 'sleep' && st.until && Date.parse(sus.wake_at) === Date.parse(st.until);
        const meta = item('sleep', st.name, asleep ? 'sleeping' : 'slept', '☾', [n + '. Sleep ', code(st.name)]);
        meta.append(asleep ? 'wakes ' : 'woke ', wake(st.until), ' · from ', when(st.at), ' · attempt ' + st.attempt);
      } else {
        const signal = st.signal || st.name;
        waitedFor.add(signal);
        const sg = arrived.get(signal);
        const outcome = st.kind === 'wait' ? 'waiting' : (st.timed_out ? 'timed_out' : 'signalled');
        const meta = item('wait', st.name, outcome, st.kind === 'wait' ? '…' : (st.timed_out ? '✕' : '✓'), [n + '. Signal ', code(signal)]);
        if (sg && !st.timed_out) {
          meta.append('arrived ', wake(sg.at), ' · payload ' + bytes(st.result_size || JSON.stringify(sg.payload === undefined ? null : sg.payload).length));
        } else if (st.kind === 'wait') {
          meta.append('times out ', wake(st.until));
        } else {
          meta.append('timed out ', wake(st.until));
        }
        meta.append(' · attempt ' + st.attempt);
      }
    }
    for (const sg of signals) {
      if (waitedFor.has(sg.name)) continue;
      const meta = item('signal', sg.name, 'arrived', '✉', ['Signal ', code(sg.name)]);
      meta.append('arrived ', wake(sg.at), ' · not waited for yet · payload ' + bytes(JSON.stringify(sg.payload === undefined ? null : sg.payload).length));
    }
    $('detail-durable').hidden = !ol.childElementCount;
  }

  // wake shows a time of the durable timeline: its date and time, with
  // how long ago (or in how long) as its title.
  function wake(iso) {
    const t = document.createElement('time');
    if (!iso) {
      t.textContent = '–';
      return t;
    }
    t.dateTime = iso;
    t.textContent = new Date(iso).toLocaleString();
    t.title = ago(iso);
    return t;
  }

  // renderTimeline lists the attempts the task keeps (the last 10), each
  // with its times, worker, outcome and error, and the wait before the
  // next one (the backoff, or the time a retry by hand took), and among
  // them, in time order, the promotion steps (the last 4) with their wait.
  function renderTimeline(task) {
    const ol = $('detail-timeline');
    ol.replaceChildren();
    const hist = Array.isArray(task.history) ? task.history : [];
    const items = []; // {at, li}: attempts and promotions, shown in time order
    for (const pr of Array.isArray(task.promotions) ? task.promotions : []) {
      const li = document.createElement('li');
      li.className = 'promotion';
      li.dataset.promotion = pr.from + '>' + pr.to;
      const head = document.createElement('div');
      head.className = 'attempt-head';
      const mark = document.createElement('span');
      mark.className = 'mark';
      mark.textContent = '⇧';
      const title = document.createElement('strong');
      title.textContent = 'Promoted ' + pr.from + ' → ' + pr.to;
      head.append(mark, ' ', title);
      const meta = document.createElement('div');
      meta.className = 'small muted';
      meta.append(when(pr.at), ' · after waiting ' + duration((pr.waited_ms || 0) / 1000) + ' at ' + pr.from);
      li.append(head, meta);
      items.push({ at: Date.parse(pr.at), li });
    }
    hist.forEach((a, i) => {
      const li = document.createElement('li');
      li.dataset.attempt = String(a.attempt);
      const last = i === hist.length - 1;
      const parked = parkedAttempt(a);
      let outcome = parked || (a.error ? 'failed' : 'succeeded');
      if (last && !a.error && task.status !== 'completed') outcome = task.status === 'cancelled' ? 'cancelled' : 'ended';
      li.className = 'attempt ' + (parked ? 'parked' : a.error ? 'failed' : 'ok');
      const head = document.createElement('div');
      head.className = 'attempt-head';
      const mark = document.createElement('span');
      mark.className = 'mark';
      mark.textContent = parked ? '☾' : a.error ? '✕' : '✓';
      const title = document.createElement('strong');
      title.textContent = 'Attempt ' + a.attempt;
      const out = document.createElement('span');
      out.className = 'outcome';
      out.dataset.outcome = outcome;
      out.textContent = outcome;
      head.append(mark, ' ', title, ' ', out);
      const meta = document.createElement('div');
      meta.className = 'small muted';
      const ms = a.started_at && a.finished_at ? Date.parse(a.finished_at) - Date.parse(a.started_at) : NaN;
      const took = isNaN(ms) ? '–' : (ms < 100 ? 'under 0.1 s' : duration(ms / 1000));
      meta.append(when(a.started_at), ' · ran ' + took + ' · worker ', code(a.worker_id || '?'));
      li.append(head, meta);
      if (a.error) {
        const e = document.createElement('div');
        e.className = 'attempt-error';
        e.dataset.error = '';
        e.textContent = a.error;
        li.append(e);
      }
      const nxt = hist[i + 1];
      if (nxt && a.finished_at && nxt.started_at) {
        const gap = document.createElement('div');
        gap.className = 'gap small muted';
        gap.textContent = '↓ waited ' + duration((Date.parse(nxt.started_at) - Date.parse(a.finished_at)) / 1000) +
          (parked ? ' (' + parked + ': no attempt spent)' : nxt.attempt <= a.attempt ? ' (retried by hand: attempts reset)' : ' before the next attempt');
        li.append(gap);
      }
      items.push({ at: Date.parse(a.started_at), li });
    });
    // Stable: a promotion and an attempt in the same second keep that order.
    items.sort((x, y) => (x.at || 0) - (y.at || 0));
    ol.append(...items.map((x) => x.li));
    if (!hist.length) {
      const li = document.createElement('li');
      li.className = 'muted';
      li.textContent = task.status === 'scheduled' || task.status === 'queued' ? 'Not started yet.' : 'No attempts recorded.';
      ol.append(li);
    }
  }

  // parkedAttempt names an attempt that ended without being spent:
  // 'suspended' (a durable sleep or signal wait) or 'snoozed'; '' for any
  // other attempt. It reads the attempt's outcome, or, for attempts
  // recorded before outcomes were, the message the consumer wrote.
  function parkedAttempt(a) {
    if (a.outcome) return a.outcome === 'suspended' || a.outcome === 'snoozed' ? a.outcome : '';
    const e = a.error || '';
    if (e.startsWith('sleeping until ') || e.startsWith('waiting for signal ')) return 'suspended';
    if (e.startsWith('snoozed for ')) return 'snoozed';
    return '';
  }

  // renderBodies shows the payload and result in collapsible JSON
  // viewers, with their size; a body kept off the record (over 3 KiB) is
  // fetched only when its Load button is pressed.
  function renderBodies(task) {
    const box = $('detail-bodies');
    box.replaceChildren();
    const loaded = state.bodies.get(task.id) || {};
    for (const [key, sizeKey, label] of [['payload', 'payload_size', 'Payload'], ['result', 'result_size', 'Result']]) {
      const sec = document.createElement('section');
      sec.className = 'body';
      sec.dataset.body = key;
      const h = document.createElement('h3');
      h.className = 'sub';
      // A body kept off the record comes as null (or absent) with its size.
      const onRecord = task[key] !== undefined && !(task[key] === null && task[sizeKey]);
      const value = onRecord ? task[key] : loaded[key];
      const size = task[sizeKey] || (value !== undefined ? new TextEncoder().encode(JSON.stringify(value)).length : 0);
      h.textContent = label + (value !== undefined || task[sizeKey] ? ' · ' + bytes(size) : '');
      sec.append(h);
      if (value !== undefined) {
        sec.append(jsonView(value));
      } else if (task[sizeKey]) {
        const b = document.createElement('button');
        b.type = 'button';
        b.className = 'secondary';
        b.dataset.load = key;
        b.textContent = 'Load ' + label.toLowerCase() + ' (' + bytes(task[sizeKey]) + ', kept off the record)';
        b.addEventListener('click', () => loadBodies(task.id, b));
        sec.append(b);
      } else {
        sec.append(textNode(key === 'result' ? 'No result.' : 'No payload.'));
      }
      box.append(sec);
    }
  }

  async function loadBodies(id, button) {
    button.disabled = true;
    try {
      const full = await api('GET', 'tasks/' + encodeURIComponent(id));
      state.bodies.set(id, { payload: full.payload, result: full.result });
      if (state.task && state.task.id === id) renderBodies(state.task);
    } catch (err) {
      report('Loading the bodies of task ' + id, err);
      button.disabled = false;
    }
  }

  // jsonView renders a JSON value as a tree: objects and arrays are
  // <details> (open two levels deep), so a large body can be folded.
  function jsonView(value) {
    const root = document.createElement('div');
    root.className = 'json';
    root.append(jsonNode(value, 0));
    return root;
  }

  function jsonNode(v, depth) {
    if (v === null || typeof v !== 'object') {
      const span = document.createElement('span');
      span.className = 'j-' + (v === null ? 'null' : typeof v);
      span.textContent = JSON.stringify(v);
      return span;
    }
    const isArr = Array.isArray(v);
    const keys = isArr ? v.map((_, i) => i) : Object.keys(v);
    const det = document.createElement('details');
    det.open = depth < 2;
    const sum = document.createElement('summary');
    sum.textContent = isArr ? '[ ' + keys.length + ' items ]' : '{ ' + keys.length + ' keys }';
    det.append(sum);
    const ul = document.createElement('ul');
    for (const k of keys) {
      const li = document.createElement('li');
      const key = document.createElement('span');
      key.className = 'j-key';
      key.textContent = isArr ? k + ': ' : JSON.stringify(k) + ': ';
      li.append(key, jsonNode(v[k], depth + 1));
      ul.append(li);
    }
    det.append(ul);
    return det;
  }

  async function taskAction(action, button) {
    const id = state.selected;
    if (!id) return;
    if (action === 'delete' && !armed(button, 'Really delete?')) return;
    button.disabled = true;
    $('detail-status').textContent = { cancel: 'Cancelling…', retry: 'Retrying…', delete: 'Deleting…' }[action];
    try {
      const task = await act(action, id);
      if (action === 'delete') {
        closeDetail();
      } else {
        if (state.selected === id) showTask(task);
        $('detail-status').textContent = action === 'cancel'
          ? (task.cancel_requested && task.status !== 'cancelled' ? 'Cancel requested' : 'Cancelled')
          : 'Queued again';
      }
      refreshNow();
    } catch (err) {
      $('detail-status').textContent = '';
      report(action[0].toUpperCase() + action.slice(1) + ' task ' + id, err);
      if (state.task && state.selected === id) showTask(state.task);
      else button.disabled = false;
    }
  }

  // ---- dead letters ------------------------------------------------------

  function dlqQuery() {
    const q = new URLSearchParams();
    q.set('limit', '200');
    const p = $('dlq-priority').value;
    const t = $('dlq-type').value;
    const r = $('dlq-reason').value.trim();
    if (p) q.set('priority', p);
    if (t) q.set('type', t);
    if (r) q.set('reason', r);
    return q;
  }

  // loadDLQ lists up to 200 dead letters matching the filters (one
  // request, at most one in flight).
  async function loadDLQ(quiet) {
    if (state.dlqRunning) return;
    state.dlqRunning = true;
    try {
      const body = await api('GET', 'dlq?' + dlqQuery().toString());
      renderDLQ(body);
      clearError('dlq');
    } catch (err) {
      if (!quiet || !(err instanceof APIError && err.status === 401)) report('Loading dead letters', err, 'dlq');
    } finally {
      state.dlqRunning = false;
    }
  }

  function renderDLQ(body) {
    const msgs = Array.isArray(body.messages) ? body.messages : [];
    state.dlq = msgs;
    const ids = new Set(msgs.map((m) => m.task_id).filter(Boolean));
    for (const id of [...state.dlqChecked]) if (!ids.has(id)) state.dlqChecked.delete(id);
    const rows = msgs.map((m) => {
      const tr = document.createElement('tr');
      tr.dataset.message = m.message_id;
      if (m.task_id) tr.dataset.task = m.task_id;
      const box = document.createElement('input');
      box.type = 'checkbox';
      box.disabled = !m.task_id;
      box.dataset.dlqCheck = m.task_id || '';
      box.checked = !!m.task_id && state.dlqChecked.has(m.task_id);
      box.setAttribute('aria-label', m.task_id ? 'Select dead letter of task ' + m.task_id : 'a message naming no task');
      cell(tr, box, 'check');
      cell(tr, badge('prio-' + m.priority, m.priority));
      if (m.task_id) {
        const open = document.createElement('button');
        open.type = 'button';
        open.className = 'link';
        open.dataset.open = m.task_id;
        open.textContent = m.task_id;
        cell(tr, open, 'id');
      } else {
        cell(tr, '(no task: ' + (m.body || '').slice(0, 40) + ')', 'muted');
      }
      cell(tr, m.type || '–');
      cell(tr, m.reason || '', 'reason');
      cell(tr, String(m.receive_count || 0), 'num');
      cell(tr, when(m.sent_at));
      return tr;
    });
    if (!rows.length) {
      const tr = document.createElement('tr');
      tr.className = 'empty';
      const td = cell(tr, 'No dead letters' + (dlqQuery().toString().includes('&') ? ' match the filters.' : '.'));
      td.colSpan = 7;
      rows.push(tr);
    }
    $('dlq-body').replaceChildren(...rows);
    $('dlq-count').textContent = msgs.length + (msgs.length === 1 ? ' message' : ' messages') + (body.truncated ? ' (read stopped at 1,000 a priority)' : '');
    renderDLQSelection();
  }

  function renderDLQSelection() {
    const n = state.dlqChecked.size;
    const b = $('dlq-replay-selected');
    b.disabled = n === 0;
    b.textContent = 'Replay selected' + (n ? ' (' + n + ')' : '');
    const all = $('dlq-select-all');
    const selectable = state.dlq.filter((m) => m.task_id).length;
    all.checked = n > 0 && n === selectable;
    all.indeterminate = n > 0 && n < selectable;
  }

  // dlqFilterBody is the replay/purge body for the filters shown.
  function dlqFilterBody() {
    const q = dlqQuery();
    const body = {};
    for (const k of ['priority', 'type', 'reason']) if (q.get(k)) body[k] = q.get(k);
    return body;
  }

  async function dlqCall(what, path, body) {
    const status = $('dlq-status');
    status.textContent = what + '…';
    status.className = 'small';
    try {
      const res = await api('POST', path, JSON.stringify(body));
      status.textContent = path.endsWith('purge')
        ? 'Purged ' + res.purged + ' dead task(s)' + (res.poison ? ' and ' + res.poison + ' unreadable message(s)' : '') + '.'
        : 'Replayed ' + res.replayed + ' task(s)' + (res.skipped ? ', ' + res.skipped + ' skipped' : '') + '.';
      status.className = 'small ok';
      state.dlqChecked.clear();
    } catch (err) {
      status.textContent = what + ' failed: ' + describe(err);
      status.className = 'small err';
    }
    await loadDLQ(true);
    refreshNow();
  }

  function askPurge() {
    const f = dlqFilterBody();
    const parts = Object.entries(f).map(([k, v]) => k + ' ' + JSON.stringify(v));
    $('dlq-confirm-text').textContent = 'Purge deletes every dead task whose dead letter matches ' +
      (parts.length ? parts.join(', ') : 'no filter: all of them') + ', with its message, for good. They cannot be replayed afterwards.';
    $('dlq-confirm').hidden = false;
    $('dlq-confirm-no').focus();
  }

  // ---- charts ------------------------------------------------------------
  //
  // Every number comes from the counters behind /stats and /stats/history
  // (constant cost): nothing here reads tasks, except the five most recent
  // failures, one page of the by-due index. The charts are SVG drawn here;
  // colours come from the stylesheet (classes), so the CSP needs no inline
  // style, and every chart also says its numbers in text (titles, legend).

  const SVG = 'http://www.w3.org/2000/svg';

  function svgEl(name, attrs, text) {
    const el = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    if (text !== undefined) {
      const t = document.createElementNS(SVG, 'title');
      t.textContent = text;
      el.append(t);
    }
    return el;
  }

  // scaleNote says a stretched chart's scale in text beside it (text in
  // an SVG drawn with preserveAspectRatio none would be stretched too).
  function scaleNote(box, text) {
    const p = document.createElement('p');
    p.className = 'scale small muted';
    p.textContent = text;
    box.append(p);
  }

  // loadSlow reads the panels that change slowly at most every SLOW_MS,
  // one request each, never two at once.
  async function loadSlow(force) {
    if (state.slowRunning || (!force && Date.now() - state.slowAt < SLOW_MS)) return;
    state.slowRunning = true;
    state.slowAt = Date.now();
    try {
      const [hist, fails] = await Promise.allSettled([
        api('GET', 'stats/history?minutes=60'),
        api('GET', 'tasks?status=dead_letter&limit=5'),
      ]);
      if (hist.status === 'fulfilled') {
        renderThroughput(hist.value.minutes || []);
        depthHistory(hist.value.minutes || []);
      } else if (hist.reason instanceof APIError && (hist.reason.status === 501 || hist.reason.status === 404)) {
        // An API that keeps no history (501) or predates the route (404).
        $('chart-throughput').replaceChildren(textNode('This API keeps no throughput history.'));
      } else {
        report('Loading the throughput history', hist.reason, 'history');
      }
      if (fails.status === 'fulfilled') renderFailures(fails.value.tasks || []);
    } finally {
      state.slowRunning = false;
    }
  }

  function renderThroughput(minutes) {
    const box = $('chart-throughput');
    const W = 600, H = 140, pad = 18;
    const max = Math.max(1, ...minutes.map((m) => (m.completed || 0) + (m.failed || 0)));
    const bw = (W - pad) / Math.max(minutes.length, 1);
    const svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + H, class: 'svg-chart', preserveAspectRatio: 'none' });
    svg.append(svgEl('line', { x1: pad, y1: H - pad, x2: W, y2: H - pad, class: 'axis' }));
    let completed = 0;
    let failed = 0;
    minutes.forEach((m, i) => {
      const c = m.completed || 0;
      const f = m.failed || 0;
      completed += c;
      failed += f;
      const x = pad + i * bw;
      const hc = (H - 2 * pad) * c / max;
      const hf = (H - 2 * pad) * f / max;
      const label = new Date(m.start).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }) + ': ' + c + ' completed, ' + f + ' dead-lettered';
      const g = svgEl('g', {}, label);
      if (c) g.append(svgEl('rect', { x: x + 0.5, y: H - pad - hc, width: Math.max(bw - 1, 1), height: hc, class: 'bar-completed' }));
      if (f) g.append(svgEl('rect', { x: x + 0.5, y: H - pad - hc - hf, width: Math.max(bw - 1, 1), height: hf, class: 'bar-failed' }));
      g.append(svgEl('rect', { x, y: pad, width: bw, height: H - 2 * pad, class: 'hit' }));
      svg.append(g);
    });
    svg.dataset.completed = String(completed);
    svg.dataset.failed = String(failed);
    box.replaceChildren(svg);
    scaleNote(box, 'top: ' + max + ' a minute');
    $('chart-tp-total').textContent = '· last hour: ' + completed.toLocaleString() + ' completed, ' + failed.toLocaleString() + ' dead-lettered';
  }

  // depthHistory keeps the depths the promoter sampled a minute at a time
  // (GET /stats/history): the chart's last hour, whenever the page opened.
  function depthHistory(minutes) {
    state.depthHist = minutes.filter((m) => m.depth).map((m) => {
      const s = { at: Date.parse(m.start) };
      for (const p of PRIORITIES) s[p] = (m.depth[p] || {}).depth || 0;
      return s;
    });
    renderDepth();
  }

  // sampleDepth keeps the queue depths /stats reported while the page is
  // open: the chart's live end, and all of it where the API keeps no
  // depth history.
  function sampleDepth(queues) {
    const now = Date.now();
    const s = { at: now };
    for (const p of PRIORITIES) s[p] = (queues[p] || {}).depth || 0;
    state.depth.push(s);
    while (state.depth.length && state.depth[0].at < now - HOUR_MS) state.depth.shift();
    renderDepth();
  }

  function renderDepth() {
    const box = $('chart-depth');
    const W = 600, H = 140, pad = 18;
    const hist = state.depthHist || [];
    const lastHist = hist.length ? hist[hist.length - 1].at : 0;
    const live = state.depth.filter((s) => s.at > lastHist + 60000);
    const newest = state.depth[state.depth.length - 1];
    if (newest && newest.at > lastHist && !live.includes(newest)) live.push(newest); // the depth now
    const pts = hist.concat(live);
    const max = Math.max(1, ...pts.map((s) => Math.max(s.high, s.medium, s.low)));
    const t0 = pts.length ? pts[0].at : 0;
    const span = Math.max(pts.length ? pts[pts.length - 1].at - t0 : 0, 60000);
    const svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + H, class: 'svg-chart', preserveAspectRatio: 'none' });
    svg.append(svgEl('line', { x1: pad, y1: H - pad, x2: W, y2: H - pad, class: 'axis' }));
    for (const p of PRIORITIES) {
      const d = pts.map((s, i) => (i ? 'L' : 'M') + (pad + (W - pad) * (s.at - t0) / span).toFixed(1) + ' ' +
        (H - pad - (H - 2 * pad) * s[p] / max).toFixed(1)).join(' ');
      const last = pts.length ? pts[pts.length - 1][p] : 0;
      if (d) svg.append(svgEl('path', { d, class: 'line-' + p }, p + ': ' + last + ' now'));
    }
    svg.dataset.minutes = String(hist.length);
    box.replaceChildren(svg);
    const now = pts.length ? pts[pts.length - 1] : { high: 0, medium: 0, low: 0 };
    scaleNote(box, 'top: ' + max + ' · now high ' + now.high + ', medium ' + now.medium + ', low ' + now.low);
  }

  function renderStatusChart(statuses) {
    const box = $('chart-statuses');
    const total = STATUSES.reduce((n, s) => n + (statuses[s] || 0), 0);
    const W = 600, H = 26;
    const svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + H, class: 'svg-chart bar', preserveAspectRatio: 'none' });
    let x = 0;
    for (const s of STATUSES) {
      const n = statuses[s] || 0;
      if (!n) continue;
      const w = W * n / total;
      svg.append(svgEl('rect', { x, y: 0, width: w, height: H, class: 'seg-' + s },
        s + ': ' + n.toLocaleString() + ' (' + Math.round(100 * n / total) + '%)'));
      x += w;
    }
    if (!total) svg.append(svgEl('rect', { x: 0, y: 0, width: W, height: H, class: 'seg-empty' }, 'no tasks'));
    const legend = document.createElement('p');
    legend.className = 'legend small';
    for (const s of STATUSES) {
      if (!statuses[s]) continue;
      const sw = document.createElement('span');
      sw.className = 'sw seg-' + s;
      legend.append(sw, ' ' + s + ' ' + statuses[s].toLocaleString() + ' ');
    }
    box.replaceChildren(svg, legend);
  }

  function renderTypeChart(types) {
    const box = $('chart-types');
    const rows = Object.entries(types).map(([t, c]) => [t, Object.values(c || {}).reduce((a, b) => a + b, 0)])
      .sort((a, b) => b[1] - a[1]).slice(0, 8);
    const max = Math.max(1, ...rows.map((r) => r[1]));
    const W = 300, rowH = 18, x0 = 100, room = W - x0 - 50;
    const svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + Math.max(rows.length * rowH, rowH), class: 'svg-chart types' });
    rows.forEach(([t, n], i) => {
      const g = svgEl('g', { 'data-type': t }, t + ': ' + n.toLocaleString());
      g.append(svgEl('rect', { x: x0, y: i * rowH + 3, width: Math.max(room * n / max, 1), height: rowH - 6, class: 'bar-type' }));
      const label = svgEl('text', { x: 0, y: i * rowH + rowH - 5, class: 'label' });
      label.textContent = t.length > 16 ? t.slice(0, 15) + '…' : t;
      const val = svgEl('text', { x: x0 + 4 + room * n / max, y: i * rowH + rowH - 5, class: 'label' });
      val.textContent = n.toLocaleString();
      g.append(label, val);
      svg.append(g);
    });
    box.replaceChildren(svg);
  }

  function renderFailures(tasks) {
    const ol = $('recent-failures');
    const items = tasks.map((t) => {
      const li = document.createElement('li');
      const open = document.createElement('button');
      open.type = 'button';
      open.className = 'link';
      open.dataset.open = t.id;
      open.textContent = t.type + ' ' + t.id.slice(-6);
      open.title = t.id;
      const msg = document.createElement('span');
      msg.className = 'small';
      msg.textContent = ' ' + (t.error ? t.error.message : '') + ' · ';
      li.append(open, msg, when(t.completed_at));
      return li;
    });
    if (!items.length) {
      const li = document.createElement('li');
      li.className = 'muted';
      li.textContent = 'No dead-lettered tasks.';
      items.push(li);
    }
    ol.replaceChildren(...items);
  }

  // ---- workers -----------------------------------------------------------

  const WORKER_MARK = { active: '●', draining: '◐', dead: '✕' };

  // loadWorkers reads the registry (GET /workers: O(instances), no task
  // read) while the Workers tab is shown.
  async function loadWorkers() {
    if (state.workersRunning) return;
    state.workersRunning = true;
    try {
      renderWorkers(await api('GET', 'workers'));
      clearError('workers');
    } catch (err) {
      report('Loading workers', err, 'workers');
    } finally {
      state.workersRunning = false;
    }
  }

  function renderWorkers(body) {
    const ws = Array.isArray(body.workers) ? body.workers : [];
    const rows = ws.map((w) => {
      const tr = document.createElement('tr');
      tr.dataset.worker = w.id;
      cell(tr, code(w.id), 'id');
      cell(tr, w.kind || '');
      const st = badge('worker-' + w.state, (WORKER_MARK[w.state] || '?') + ' ' + w.state);
      st.dataset.state = w.state;
      cell(tr, st);
      const busy = document.createElement('span');
      const meter = document.createElement('meter');
      meter.min = 0;
      meter.max = Math.max(w.capacity || 0, 1);
      meter.value = w.busy || 0;
      meter.setAttribute('aria-label', 'busy slots of ' + w.id);
      busy.append(meter, ' ' + (w.busy || 0) + ' / ' + (w.capacity || 0));
      cell(tr, busy, 'num');
      const types = Array.isArray(w.types) ? w.types : null;
      cell(tr, types ? (types.length ? types.join(', ') : 'any') : '–');
      cell(tr, when(w.started_at));
      const hb = when(w.last_heartbeat_at);
      if (w.heartbeat_seconds) hb.title += ' · every ' + w.heartbeat_seconds + ' s';
      cell(tr, hb);
      return tr;
    });
    if (!rows.length) {
      const tr = document.createElement('tr');
      tr.className = 'empty';
      cell(tr, 'No consumer instances registered.').colSpan = 7;
      rows.push(tr);
    }
    $('workers-body').replaceChildren(...rows);
    const count = (s) => ws.filter((w) => w.state === s).length;
    const cap = ws.filter((w) => w.state !== 'dead').reduce((n, w) => n + (w.capacity || 0), 0);
    const used = ws.filter((w) => w.state !== 'dead').reduce((n, w) => n + (w.busy || 0), 0);
    $('workers-summary').textContent = count('active') + ' active, ' + count('draining') + ' draining, ' + count('dead') +
      ' dead; ' + used + ' of ' + cap + ' slots busy';
  }

  // ---- views -------------------------------------------------------------

  function showView(view) {
    state.view = view;
    for (const tab of document.querySelectorAll('[role="tab"]')) {
      const on = tab.dataset.view === view;
      tab.setAttribute('aria-selected', on ? 'true' : 'false');
      tab.tabIndex = on ? 0 : -1;
    }
    $('view-tasks').hidden = view !== 'tasks';
    $('view-dlq').hidden = view !== 'dlq';
    $('view-controls').hidden = view !== 'controls';
    $('view-workers').hidden = view !== 'workers';
    if (view === 'workers') loadWorkers();
    if (view === 'dlq') loadDLQ(false);
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

    for (const tab of document.querySelectorAll('[role="tab"]')) {
      tab.addEventListener('click', () => showView(tab.dataset.view));
      tab.addEventListener('keydown', (ev) => {
        if (ev.key !== 'ArrowRight' && ev.key !== 'ArrowLeft') return;
        const tabs = [...document.querySelectorAll('[role="tab"]')];
        const next = tabs[(tabs.indexOf(tab) + (ev.key === 'ArrowRight' ? 1 : tabs.length - 1)) % tabs.length];
        next.focus();
        showView(next.dataset.view);
      });
    }

    $('filters').addEventListener('submit', (ev) => {
      ev.preventDefault();
      resetPaging();
    });
    $('filters').addEventListener('change', resetPaging);
    $('lookup').addEventListener('submit', lookup);
    $('page-next').addEventListener('click', pageNext);
    $('page-prev').addEventListener('click', pagePrev);

    $('tasks-body').addEventListener('click', (ev) => {
      const box = ev.target.closest('input[data-check]');
      if (box) {
        if (box.checked) state.checked.add(box.dataset.check);
        else state.checked.delete(box.dataset.check);
        renderBulk();
        return;
      }
      const b = ev.target.closest('button[data-action]');
      if (b) {
        rowAction(b.dataset.action, b.dataset.id, b);
        return;
      }
      const tr = ev.target.closest('tr[data-id]');
      if (tr && !ev.target.closest('td.check')) openTask(tr.dataset.id);
    });
    $('select-all').addEventListener('change', (ev) => {
      state.checked.clear();
      if (ev.target.checked) for (const t of state.tasks) state.checked.add(t.id);
      for (const box of document.querySelectorAll('#tasks-body input[data-check]')) box.checked = ev.target.checked;
      renderBulk();
    });
    for (const a of ['retry', 'cancel', 'delete']) $('bulk-' + a).addEventListener('click', () => bulk(a));

    $('detail-close').addEventListener('click', closeDetail);
    $('task-cancel').addEventListener('click', () => taskAction('cancel', $('task-cancel')));
    $('task-retry').addEventListener('click', () => taskAction('retry', $('task-retry')));
    $('task-delete').addEventListener('click', () => taskAction('delete', $('task-delete')));
    $('submit-form').addEventListener('submit', submitTask);

    let reasonTimer = 0;
    $('dlq-filters').addEventListener('submit', (ev) => {
      ev.preventDefault();
      loadDLQ(false);
    });
    $('dlq-filters').addEventListener('change', () => {
      state.dlqChecked.clear();
      loadDLQ(false);
    });
    $('dlq-reason').addEventListener('input', () => {
      clearTimeout(reasonTimer);
      reasonTimer = setTimeout(() => loadDLQ(false), 300);
    });
    $('dlq-body').addEventListener('click', (ev) => {
      const box = ev.target.closest('input[data-dlq-check]');
      if (box && box.dataset.dlqCheck) {
        if (box.checked) state.dlqChecked.add(box.dataset.dlqCheck);
        else state.dlqChecked.delete(box.dataset.dlqCheck);
        renderDLQSelection();
        return;
      }
      const open = ev.target.closest('button[data-open]');
      if (open) {
        showView('tasks');
        openTask(open.dataset.open);
      }
    });
    $('dlq-select-all').addEventListener('change', (ev) => {
      state.dlqChecked.clear();
      if (ev.target.checked) for (const m of state.dlq) if (m.task_id) state.dlqChecked.add(m.task_id);
      for (const box of document.querySelectorAll('#dlq-body input[data-dlq-check]')) box.checked = ev.target.checked && !!box.dataset.dlqCheck;
      renderDLQSelection();
    });
    $('dlq-replay-selected').addEventListener('click', () =>
      dlqCall('Replaying ' + state.dlqChecked.size + ' selected', 'dlq/replay', { task_ids: [...state.dlqChecked] }));
    $('dlq-replay-matching').addEventListener('click', () =>
      dlqCall('Replaying all matching', 'dlq/replay', dlqFilterBody()));
    $('dlq-purge').addEventListener('click', askPurge);
    $('dlq-confirm-no').addEventListener('click', () => {
      $('dlq-confirm').hidden = true;
    });
    $('dlq-confirm-yes').addEventListener('click', () => {
      $('dlq-confirm').hidden = true;
      dlqCall('Purging', 'dlq/purge', Object.assign(dlqFilterBody(), { confirm: true }));
    });

    $('controls-body').addEventListener('click', (ev) => {
      const save = ev.target.closest('button[data-save]');
      if (save) {
        saveLimits(save.dataset.save, save);
        return;
      }
      const toggle = ev.target.closest('button[data-toggle]');
      if (toggle) toggleType(toggle.closest('tr').dataset.type, toggle.dataset.toggle, toggle);
    });
    $('cleanup').addEventListener('submit', cleanup);
    $('recent-failures').addEventListener('click', (ev) => {
      const open = ev.target.closest('button[data-open]');
      if (open) {
        showView('tasks');
        openTask(open.dataset.open);
      }
    });

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
