-- The proctor view (issue 33): the class's live view in an exam's mode shows
-- each student's signals and end. A new signal and a change of extra time
-- are announced on 'class_live' with the student's id, as every other change
-- the view shows is (migration 007's notify_class_live).
CREATE TRIGGER exam_signals_class_live AFTER INSERT ON exam_signals FOR EACH ROW
    EXECUTE FUNCTION notify_class_live();
CREATE TRIGGER exam_extra_time_class_live AFTER INSERT OR UPDATE OR DELETE ON exam_extra_time FOR EACH ROW
    EXECUTE FUNCTION notify_class_live();
