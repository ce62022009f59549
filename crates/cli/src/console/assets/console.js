// skillforge console: the live output tail of a job page (polls /jobs/ID/output every second
// while the job runs) and the "select all" box of the jobs list. No build step, no framework.
(function () {
  var tail = document.getElementById('live-output');
  if (tail) {
    var cursor = tail.getAttribute('data-cursor') || '';
    var url = tail.getAttribute('data-url');
    var status = document.getElementById('live-status');
    var poll = function () {
      fetch(url + (cursor ? '?after=' + encodeURIComponent(cursor) : ''), { credentials: 'same-origin' })
        .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
        .then(function (page) {
          page.chunks.forEach(function (c) {
            tail.textContent += c.text;
            cursor = c.cursor;
          });
          if (page.chunks.length) { tail.scrollTop = tail.scrollHeight; }
          if (status) { status.textContent = page.running ? 'live: the job is running' : 'the job is ' + page.state + '; reload for its outcome'; }
          if (page.running) { setTimeout(poll, 1000); }
        })
        .catch(function () { if (status) { status.textContent = 'live output stopped (reload to try again)'; } });
    };
    poll();
  }
  var all = document.getElementById('select-all');
  if (all) {
    all.addEventListener('change', function () {
      document.querySelectorAll('input[name="id"]').forEach(function (b) { b.checked = all.checked; });
    });
  }
})();
