//! A real headless Chromium driven over the DevTools protocol through `--remote-debugging-pipe`
//! (commands on the child's fd 3, replies on its fd 4, each message ended by a NUL byte): no
//! WebSocket and no CDP crate to build. Enough for the console tests: open a page, evaluate
//! JavaScript in it, click, wait for a condition (polling with a deadline), take a screenshot.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

/// How long one protocol call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// One headless Chromium with one page (tab), killed on drop.
pub struct Browser {
    child: Child,
    commands: std::fs::File,
    replies: Receiver<Value>,
    session: String,
    next_id: u64,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts `chromium` (the Debian package, installed by `scripts/test`) headless, with a fresh
    /// profile, and opens one blank page of `width`×`height`.
    ///
    /// # Panics
    /// When Chromium cannot start or does not answer.
    #[expect(
        unsafe_code,
        reason = "pre_exec and taking ownership of a dup'ed fd are unsafe; see SAFETY"
    )]
    pub fn start(width: u32, height: u32) -> Self {
        let profile = tempfile::tempdir().unwrap();
        let (cmd_r, cmd_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let (resp_r, resp_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        // The child's ends at fds ≥ 10 first, so moving them to 3 and 4 never overwrites one.
        // SAFETY: F_DUPFD_CLOEXEC returns a new fd that nothing else owns.
        let high = |fd: &OwnedFd| unsafe {
            OwnedFd::from_raw_fd(
                nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(10)).unwrap(),
            )
        };
        let (child_in, child_out) = (high(&cmd_r), high(&resp_w));
        drop((cmd_r, resp_w));
        let (fd_in, fd_out) = (child_in.as_raw_fd(), child_out.as_raw_fd());
        let mut cmd = Command::new("chromium");
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--remote-debugging-pipe",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--window-size={width},{height}"))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own process group: the drop ends the renderers and helpers with it.
        .process_group(0);
        // SAFETY: only dup2 (async-signal-safe) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                for (from, to) in [(fd_in, 3), (fd_out, 4)] {
                    let moved = nix::unistd::dup2_raw(BorrowedFd::borrow_raw(from), to)
                        .map_err(std::io::Error::from)?;
                    std::mem::forget(moved);
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .expect("chromium (Debian package `chromium`, installed by scripts/test)");
        drop((child_in, child_out));
        let (tx, replies) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(std::fs::File::from(resp_r));
            let mut buf = Vec::new();
            while reader.read_until(0, &mut buf).is_ok_and(|n| n > 0) {
                buf.pop_if(|b| *b == 0);
                if let Ok(v) = serde_json::from_slice::<Value>(&buf)
                    && tx.send(v).is_err()
                {
                    return;
                }
                buf.clear();
            }
        });
        let mut browser = Self {
            child,
            commands: std::fs::File::from(cmd_w),
            replies,
            session: String::new(),
            next_id: 0,
            _profile: profile,
        };
        let target = browser.call_browser("Target.createTarget", json!({"url": "about:blank"}));
        let target_id = target["targetId"].as_str().expect("a target id").to_owned();
        let attached = browser.call_browser(
            "Target.attachToTarget",
            json!({"targetId": target_id, "flatten": true}),
        );
        browser.session = attached["sessionId"]
            .as_str()
            .expect("a session id")
            .to_owned();
        browser.call("Page.enable", json!({}));
        browser.call("Runtime.enable", json!({}));
        browser.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        );
        browser
    }

    fn send(&mut self, method: &str, params: Value, session: Option<&str>) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.commands.write_all(&bytes).expect("write to chromium");
        let deadline = Instant::now() + CALL_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.replies.recv_timeout(left) {
                Ok(v) if v["id"].as_u64() == Some(id) => {
                    assert!(v.get("error").is_none(), "{method} failed: {v}");
                    return v["result"].clone();
                }
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    panic!("chromium did not answer {method} within {CALL_TIMEOUT:?}")
                }
                Err(RecvTimeoutError::Disconnected) => panic!("chromium went away during {method}"),
            }
        }
    }

    fn call_browser(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, None)
    }

    /// A protocol call on the page's session; its `result`.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let session = self.session.clone();
        self.send(method, params, Some(&session))
    }

    /// The value of `expression` evaluated in the page (promises awaited).
    pub fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(
            r.get("exceptionDetails").is_none(),
            "`{expression}` threw: {r}"
        );
        r["result"]["value"].clone()
    }

    /// Polls `expression` (every 50 ms) until it is `true`, or panics after `timeout` naming `what`
    /// and the page's text.
    pub fn wait_until(&mut self, expression: &str, timeout: Duration, what: &str) {
        let deadline = Instant::now() + timeout;
        loop {
            let r = self.call(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true}),
            );
            if r["result"]["value"] == json!(true) {
                return;
            }
            if Instant::now() >= deadline {
                let text = self.eval("document.body ? document.body.innerText : ''");
                panic!(
                    "timed out after {timeout:?} waiting for {what}; the page shows:\n{}",
                    text.as_str().unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Opens `url` and waits until it is loaded (the document complete at that address).
    pub fn open(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url}));
        self.wait_loaded(&format!("{url} to load"));
    }

    /// Waits for the document to be complete (after a navigation or a form's submission).
    pub fn wait_loaded(&mut self, what: &str) {
        self.wait_until(
            "document.readyState === 'complete' && !!document.body",
            Duration::from_secs(30),
            what,
        );
    }

    /// The page's whole HTML.
    pub fn html(&mut self) -> String {
        self.eval("document.documentElement.outerHTML")
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The page's address.
    pub fn location(&mut self) -> String {
        self.eval("location.href")
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Clicks the element `selector` (it must exist) and waits until a new document at the path
    /// `then_path` is loaded (the old document is marked first, so the wait never ends on it).
    pub fn click_to(&mut self, selector: &str, then_path: &str) {
        let sel = serde_json::to_string(selector).unwrap();
        let found = self.eval(&format!("(() => {{ const e = document.querySelector({sel}); if (!e) return false; window.__before_click = true; e.click(); return true; }})()"));
        assert_eq!(
            found,
            json!(true),
            "no element `{selector}` on {}",
            self.location()
        );
        let path = serde_json::to_string(then_path).unwrap();
        self.wait_until(
            &format!("!window.__before_click && location.pathname === {path} && document.readyState === 'complete' && !!document.body"),
            Duration::from_secs(30),
            &format!("the page {then_path} after clicking {selector}"),
        );
    }

    /// A PNG screenshot of the page, written to `path` (its bytes returned).
    pub fn screenshot(&mut self, path: &std::path::Path) -> Vec<u8> {
        let r = self.call("Page.captureScreenshot", json!({"format": "png"}));
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().expect("screenshot data"))
            .unwrap();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, &png).unwrap();
        png
    }
}

impl Drop for Browser {
    /// Asks Chromium to close, waits up to 5 s (polling), then kills its whole process group.
    fn drop(&mut self) {
        let _ = self
            .commands
            .write_all(b"{\"id\":999999,\"method\":\"Browser.close\",\"params\":{}}\0");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.child.wait();
    }
}
