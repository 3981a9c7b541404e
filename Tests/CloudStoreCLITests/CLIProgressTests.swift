import CloudStoreCLI
import CloudStoreTesting
import Testing

/// `ProgressReporter`: one rewritten line on a terminal, plain periodic lines otherwise.
@Suite("progress lines")
struct CLIProgressTests {
    @Test func notATerminal_printsAPlainLineAtMostEveryIntervalAndOneAtTheEnd() {
        let clock = TestClock()
        let captured = CapturedOutput(isTerminal: false)
        let progress = ProgressReporter("migrating", total: 1000, output: captured.output, interval: .seconds(2), clock: clock)
        clock.advance(by: .seconds(1))
        progress.advance(by: 100)
        #expect(captured.standardError.isEmpty, "nothing before the first interval")
        clock.advance(by: .seconds(1))
        progress.advance(by: 300)
        clock.advance(by: .seconds(1))
        progress.advance(by: 100)
        clock.advance(by: .seconds(1))
        progress.advance(by: 300)
        clock.advance(by: .seconds(1))
        progress.update(completed: 1000)
        progress.finish()
        progress.finish()
        #expect(
            captured.errorLines == [
                "migrating: 400/1000 (40%), 200/s",
                "migrating: 800/1000 (80%), 200/s",
                "migrating: 1000/1000 (100%) in 5.0s, 200/s",
            ])
        #expect(captured.standardOutput.isEmpty)
    }

    @Test func terminal_rewritesOneLineAndEndsIt() {
        let clock = TestClock()
        let captured = CapturedOutput(isTerminal: true)
        let progress = ProgressReporter("importing", total: nil, output: captured.output, clock: clock)
        clock.advance(by: .milliseconds(500))
        progress.advance(by: 5)
        clock.advance(by: .milliseconds(50))
        progress.advance(by: 1)
        clock.advance(by: .milliseconds(450))
        progress.advance(by: 4)
        progress.finish()
        #expect(
            captured.standardError
                == "\rimporting: 5, 10.0/s\u{1B}[K\rimporting: 10, 10.0/s\u{1B}[K\rimporting: 10 in 1.0s, 10.0/s\u{1B}[K\n")
    }

    @Test func nothingDone_endsWithAZeroLine() {
        let captured = CapturedOutput()
        let progress = ProgressReporter("migrating", total: 0, output: captured.output, clock: TestClock())
        progress.finish()
        #expect(captured.errorLines == ["migrating: 0/0 in 0.0s"])
    }
}
