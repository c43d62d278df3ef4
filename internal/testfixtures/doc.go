// Package testfixtures holds, in its subpackages, what the engine's tests
// share: real servers and proxies standing for the outside world,
// certificates, counters, and the engine itself on a fresh database
// (dispatchertest). Only tests import them: TestOnlyTestsImportFixtures
// fails for non-test code elsewhere that does.
package testfixtures
