import CloudStoreServer
import CloudStoreTesting
import Foundation
import Testing

/// `cloudstore hash-password` and `serve --sign-in-users`: an entry that checks the password it
/// was made from and no other, and sign-in users files the server could not use refused with one
/// line naming the file and the fix.
@Suite("cloudstore hash-password and serve --sign-in-users", .timeLimit(.minutes(ReliabilityRun.hangLimitMinutes)))
struct CLIHashPasswordTests {
    @Test func hashPassword_printsAnEntryThatChecksThePassword() async throws {
        try await TemporaryDirectory.with { directory in
            let passwordFile = directory.appendingPathComponent("password")
            try Data("correct horse battery staple\nsecond line\n".utf8).write(to: passwordFile)
            let result = await cloudstore(
                "hash-password", "--user", "_alice", "--login", "alice", "--password-file", passwordFile.path, "--iterations", "1000")
            #expect(result.status == 0, "\(result.standardError)")
            #expect(!result.standardOutput.contains("correct horse"), "the password is never printed")
            let entry = try JSONDecoder().decode(SignInUsers.User.self, from: Data(result.standardOutput.utf8))
            #expect(entry.userRecordName == "_alice" && entry.login == "alice")
            #expect(entry.password.algorithm == "PBKDF2-HMAC-SHA256" && entry.password.iterations == 1000)
            #expect(entry.password.matches("correct horse battery staple"))
            #expect(!entry.password.matches("second line") && !entry.password.matches("correct horse battery staple\n"))

            let again = await cloudstore(
                "hash-password", "--user", "_alice", "--login", "alice", "--password-file", passwordFile.path, "--iterations", "1000")
            #expect(again.standardOutput != result.standardOutput, "each hash has a salt of its own")

            let empty = directory.appendingPathComponent("empty")
            try Data("\n".utf8).write(to: empty)
            let none = await cloudstore("hash-password", "--user", "_alice", "--login", "alice", "--password-file", empty.path)
            #expect(none.isOneLineFailure(mentioning: "no password", empty.path), "\(none.standardError)")
            let reserved = await cloudstore("hash-password", "--user", "_operator", "--login", "op", "--password-file", passwordFile.path)
            #expect(reserved.status == 2, "a name the server keeps for others is a usage error")
        }
    }

    @Test func serve_refusesSignInUsersFilesItCannotUse() async throws {
        try await TemporaryDirectory.with { directory in
            let file = directory.appendingPathComponent("sign-in-users.json")
            func serve(_ json: String, environment: [String: String] = [:]) async throws -> CLIResult {
                try Data(json.utf8).write(to: file)
                let arguments = ["serve", "--port", "0", "--container", "iCloud.cli.test", "--data", directory.path]
                return await cloudstore(
                    environment.isEmpty ? arguments + ["--sign-in-users", file.path] : arguments, environment: environment)
            }
            let short = try await serve(#"{"secret": "too short", "users": []}"#)
            #expect(short.isOneLineFailure(mentioning: file.path, "shorter than 32 characters", "openssl rand -base64 32"), "\(short.standardError)")
            let missing = try await serve(#"{"users": []}"#, environment: ["CLOUDSTORE_SIGN_IN_USERS": file.path])
            #expect(missing.isOneLineFailure(mentioning: file.path, "the secret is missing"), "\(missing.standardError)")
            let notUsers = try await serve(#"{"secret": "0123456789abcdef0123456789abcdef", "users": {}}"#)
            #expect(notUsers.isOneLineFailure(mentioning: file.path, "users", "cloudstore hash-password"), "\(notUsers.standardError)")
            let redirect = try await serve(
                #"{"secret": "0123456789abcdef0123456789abcdef", "allowedRedirects": ["https://app.example.com/done"], "users": []}"#)
            #expect(redirect.isOneLineFailure(mentioning: file.path, "not an origin"), "\(redirect.standardError)")
        }
    }
}
