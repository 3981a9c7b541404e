import CloudStoreTesting
import Foundation
import Testing

/// Headless Chromium (Debian's `chromium` package), to load pages as a person's browser does:
/// redirects followed, cookies kept within one load, the page rendered.
///
/// ```swift
/// let page = try await Chromium.load("http://127.0.0.1:8080/console", screenshot: artifacts.appendingPathComponent("overview.png"))
/// #expect(page.text.contains("requests"))
/// ```
enum Chromium {
    /// The browser: `chromium` on the PATH, else `/usr/bin/chromium`; nil when neither exists.
    static let path: String? = {
        let directories = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
        return (directories.map { "\($0)/chromium" } + ["/usr/bin/chromium"])
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    /// Under `CI=true` a missing browser fails the tests instead of skipping them.
    static let isCI = ProcessInfo.processInfo.environment["CI"] == "true"

    /// Whether the browser tests run: a browser is there, or CI must fail for want of one.
    static let shouldRun = path != nil || isCI

    /// How long one load may take before the browser is killed.
    static let timeLimit: Duration = .seconds(60)

    /// A page as the browser shows it.
    struct Page {
        /// The document after the browser built it.
        var dom: String

        /// The text a person reads: the body without tags, entities decoded, spaces collapsed.
        var text: String {
            var body = dom
            if let start = body.range(of: "<body") { body = String(body[start.lowerBound...]) }
            body = body.replacing(#/<[^>]*>/#, with: " ")
            for (entity, character) in [("&lt;", "<"), ("&gt;", ">"), ("&quot;", "\""), ("&#39;", "'"), ("&nbsp;", " "), ("&amp;", "&")] {
                body = body.replacingOccurrences(of: entity, with: character)
            }
            return body.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        }
    }

    /// Loads `url` in a fresh headless browser (its own profile), keeps a 1200×900 screenshot at
    /// `screenshot`, and answers the page; kills the browser after ``timeLimit``. `arguments` go
    /// to the browser before the URL (a page that runs scripts for a while needs
    /// `--virtual-time-budget=<ms>`, or the document is taken when it has loaded).
    static func load(_ url: String, screenshot: URL, arguments: [String] = []) async throws -> Page {
        let browser = try #require(
            path, "headless Chromium is missing: install Debian's chromium package (apt-get install -y chromium; .ci/run does)")
        let scratch = try TemporaryDirectory(prefix: "cloudstore-chromium")
        let output = scratch.file("dom.html")
        let errors = scratch.file("stderr.txt")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        try? FileManager.default.removeItem(at: screenshot)

        let child = try ChildProcess.spawn(
            URL(fileURLWithPath: browser),
            [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--hide-scrollbars", "--user-data-dir=\(scratch.file("profile").path)", "--window-size=1200,900",
                "--screenshot=\(screenshot.path)", "--dump-dom",
            ] + arguments + [url],
            standardOutput: .file(try FileHandle(forWritingTo: output)), standardError: .file(try FileHandle(forWritingTo: errors)))
        let watchdog = Task { () -> Bool in
            do { try await Task.sleep(for: timeLimit) } catch { return false }
            child.signal(SIGKILL)
            return true
        }
        let status = await child.waitForExit().status
        watchdog.cancel()
        let timedOut = await watchdog.value
        try #require(!timedOut, "chromium took longer than \(timeLimit) to load \(url) and was killed")
        let stderr = String(decoding: (try? Data(contentsOf: errors)) ?? Data(), as: UTF8.self)
        try #require(status == 0, "chromium exited with \(status) loading \(url):\n\(stderr.suffix(2000))")
        return Page(dom: String(decoding: try Data(contentsOf: output), as: UTF8.self))
    }

    /// Where the tests keep what they leave for a person to look at: `$CLOUDSTORE_TEST_ARTIFACTS/<name>`
    /// when set, else `.build/test-artifacts/<name>` in the package; created when absent.
    static func artifactsDirectory(_ name: String) throws -> URL {
        let root =
            ProcessInfo.processInfo.environment["CLOUDSTORE_TEST_ARTIFACTS"].map { URL(fileURLWithPath: $0) }
            ?? URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/test-artifacts")
        let directory = root.appendingPathComponent(name, isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }
}
