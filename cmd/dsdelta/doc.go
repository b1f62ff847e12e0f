// Command dsdelta turns Datastream change files into Delta Lake tables and
// inspects the result: it runs the embedded pipeline on a local folder or a
// bucket, and reads any Delta table (ours or one written by Spark).
//
// Every command works on a local path or a gs://bucket/path URL. Errors are
// one line naming what failed and why. Exit codes: 0 success, 1 failure,
// 2 usage or configuration error, 3 finished with work left undone (run:
// files pending or quarantined; replay: files quarantined again).
package main
