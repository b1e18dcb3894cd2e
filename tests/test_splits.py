"""read_split on split files written as the datasets ship them (CRLF, trailing spaces, blank lines), with empty
files standing in for the videos (read_split only checks that they exist)."""

import json
import pytest
from vimpac.data import read_split, Split, SPLIT_DATASETS
from vimpac.utils import VimpacError


def write(path, text, crlf=True):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((text.replace("\n", "\r\n") if crlf else text).encode())
    return path


def touch(root, *names):
    for n in names:
        (root / n).parent.mkdir(parents=True, exist_ok=True)
        (root / n).write_bytes(b"")


def relative(root, pairs):
    "(video path relative to `root`, label) of each (path, label) in `pairs`."
    return [(p.relative_to(root).as_posix(), y) for p, y in pairs]


def refused(match, *args):
    "`read_split(*args)` raises a `VimpacError` whose message matches the regular expression `match`."
    with pytest.raises(VimpacError, match=match):
        read_split(*args)


@pytest.fixture
def ucf(tmp_path):
    root, d = tmp_path / "UCF-101", tmp_path / "ucfTrainTestlist"
    write(d / "classInd.txt", "1 ApplyEyeMakeup\n2 HandstandPushups \n3 YoYo\n\n")
    write(
        d / "trainlist01.txt",
        "ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi 1\nHandstandPushups/v_HandStandPushups_g08_c01.avi 2 \n"
        "YoYo/v_YoYo_g08_c01.avi 3\nYoYo/v_YoYo_g09_c01.avi 3\n\n",
    )
    write(
        d / "testlist01.txt",
        "ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c01.avi\nHandstandPushups/v_HandStandPushups_g01_c01.avi\n"
        "YoYo/v_YoYo_g01_c01.avi\n",
    )
    touch(
        root,
        "ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi",
        "HandstandPushups/v_HandStandPushups_g08_c01.avi",
        "YoYo/v_YoYo_g08_c01.avi",
        "ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c01.avi",
        "HandstandPushups/v_HandStandPushups_g01_c01.avi",
        "YoYo/v_YoYo_g01_c01.avi",
    )  # v_YoYo_g09 missing
    return root, d


def test_ucf101(ucf):
    root, d = ucf
    s = read_split("ucf101", root, d, split=1)
    assert isinstance(s, Split) and s.classes == ["ApplyEyeMakeup", "HandstandPushups", "YoYo"]
    assert relative(root, s.train) == [
        ("ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi", 0),
        ("HandstandPushups/v_HandStandPushups_g08_c01.avi", 1),
        ("YoYo/v_YoYo_g08_c01.avi", 2),
    ]
    assert [y for _, y in s.test] == [0, 1, 2]
    assert s.missing == [("train", root / "YoYo/v_YoYo_g09_c01.avi")]
    assert s.headline() == (
        f"ucf101 split 1: 3 train and 3 test videos, 3 classes; 1 listed but not found under {root} "
        f"(1 train, 0 test; e.g. {root / 'YoYo/v_YoYo_g09_c01.avi'})"
    )
    assert read_split("ucf101", root, d / "classInd.txt").train == s.train  # a split file names its folder
    assert "\n" not in str(s)


def test_ucf101_flat_videos(ucf, tmp_path):
    root, d = ucf
    flat = tmp_path / "flat"
    touch(flat, "v_YoYo_g01_c01.avi", "v_YoYo_g08_c01.avi")
    s = read_split("ucf101", flat, d)
    assert [(p, y) for p, y in s.test] == [(flat / "v_YoYo_g01_c01.avi", 2)] and len(s.missing) == 5


def test_ucf101_errors(ucf):
    root, d = ucf
    refused(r"split: ucf101 has splits 1 to 3, got 4", "ucf101", root, d, 4)
    refused(r"trainlist02.txt: no such file, expected UCF101's train list of split 2", "ucf101", root, d, 2)
    write(d / "trainlist03.txt", "ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi 1\n\nApplyEyeMakeup/v_x.avi one\n")
    write(d / "testlist03.txt", "YoYo/v_YoYo_g01_c01.avi\n")
    refused(
        r"trainlist03.txt, line 3: 'ApplyEyeMakeup/v_x.avi one': expected 'CLASS/VIDEO.avi LABEL'", "ucf101", root, d, 3
    )
    write(d / "trainlist03.txt", "ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi 2\n")
    refused(r"trainlist03.txt, line 1: .*expected label 1 \(class ApplyEyeMakeup", "ucf101", root, d, 3)
    write(d / "trainlist03.txt", "ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi 1\n")
    write(d / "testlist03.txt", "Juggling/v_Juggling_g01_c01.avi\n")
    refused(r"testlist03.txt, line 1: .*with CLASS in classInd.txt", "ucf101", root, d, 3)
    write(d / "classInd.txt", "1 ApplyEyeMakeup\n3 YoYo\n")
    refused(r"classInd.txt, line 2: '3 YoYo': expected '2 CLASSNAME'", "ucf101", root, d)


def test_hmdb51(tmp_path):
    root, d = tmp_path / "hmdb51", tmp_path / "testTrainMulti_7030_splits"
    write(
        d / "brush_hair_test_split1.txt",
        "April_09_brush_hair_u_nm_np1_ba_goo_0.avi 1 \nBlonde_brush_hair_f_nm_np2_le_goo_1.avi 2 \n"
        "Brushing_Hair_brush_hair_h_cm_np1_ri_goo_2.avi 0 \n\n",
    )
    write(
        d / "cartwheel_test_split1.txt",
        "Cartwheel_cartwheel_f_cm_np1_le_med_3.avi 2 \n(Rad)Schlag_cartwheel_f_cm_np1_ri_bad_4.avi 1 \n",
    )
    touch(
        root,
        "brush_hair/April_09_brush_hair_u_nm_np1_ba_goo_0.avi",
        "brush_hair/Blonde_brush_hair_f_nm_np2_le_goo_1.avi",
        "brush_hair/Brushing_Hair_brush_hair_h_cm_np1_ri_goo_2.avi",
        "cartwheel/Cartwheel_cartwheel_f_cm_np1_le_med_3.avi",
        "cartwheel/(Rad)Schlag_cartwheel_f_cm_np1_ri_bad_4.avi",
    )
    s = read_split("hmdb51", root, d, 1)
    assert s.classes == ["brush_hair", "cartwheel"]
    assert [(p.name, y) for p, y in s.train] == [
        ("April_09_brush_hair_u_nm_np1_ba_goo_0.avi", 0),
        ("(Rad)Schlag_cartwheel_f_cm_np1_ri_bad_4.avi", 1),
    ]
    assert [(p.name, y) for p, y in s.test] == [
        ("Blonde_brush_hair_f_nm_np2_le_goo_1.avi", 0),
        ("Cartwheel_cartwheel_f_cm_np1_le_med_3.avi", 1),
    ]
    assert s.missing == []
    refused(r"no HMDB51 split files \*_test_split2.txt", "hmdb51", root, d, 2)
    write(d / "cartwheel_test_split3.txt", "a.avi 1\nb.avi 3\n")
    write(d / "brush_hair_test_split3.txt", "c.avi 1\n")
    refused(r"cartwheel_test_split3.txt, line 2: 'b.avi 3': expected 'VIDEO.avi 0\|1\|2'", "hmdb51", root, d, 3)


def test_ssv2(tmp_path):
    root, d = tmp_path / "20bn-something-something-v2", tmp_path / "labels"
    write(
        d / "labels.json",
        json.dumps(
            {
                "Approaching something with your camera": "0",
                "Holding something next to something": "2",
                "Pushing something from left to right": "1",
            },
            indent=4,
        ),
    )
    write(
        d / "train.json",
        json.dumps(
            [
                {
                    "id": "78687",
                    "label": "holding potato next to vicks vaporub bottle",
                    "template": "Holding [something] next to [something]",
                    "placeholders": ["potato", "vicks vaporub bottle"],
                },
                {
                    "id": "42326",
                    "label": "pushing a pen from left to right",
                    "template": "Pushing [something] from left to right",
                    "placeholders": ["a pen"],
                },
                {
                    "id": "1",
                    "label": "x",
                    "template": "Approaching [something] with your camera",
                    "placeholders": ["x"],
                },
            ],
            indent=4,
        ),
    )
    write(
        d / "validation.json",
        json.dumps(
            [
                {
                    "id": "74225",
                    "label": "approaching a cup with your camera",
                    "template": "Approaching [something] with your camera",
                    "placeholders": ["a cup"],
                }
            ]
        ),
    )
    touch(root, "78687.webm", "42326.webm", "74225.webm")
    s = read_split("ssv2", root, d)
    assert s.classes == [
        "Approaching something with your camera",
        "Pushing something from left to right",
        "Holding something next to something",
    ]
    assert [(p.name, y) for p, y in s.train] == [("78687.webm", 2), ("42326.webm", 1)]
    assert [(p.name, y) for p, y in s.test] == [("74225.webm", 0)] and s.missing == [("train", root / "1.webm")]
    refused(r"split: ssv2 has only split 1, got 2", "ssv2", root, d, 2)
    write(d / "validation.json", json.dumps([{"id": "5", "template": "Dropping [something]"}]))
    refused(r"validation.json, entry 0: .*expected a template of labels.json", "ssv2", root, d)
    write(d / "validation.json", json.dumps([{"id": "5"}]))
    refused(r"validation.json, entry 0: .*expected an object with 'id' and 'template'", "ssv2", root, d)
    write(d / "labels.json", json.dumps({"A": "0", "B": "2"}))
    refused(r"labels.json: expected an object template -> class id", "ssv2", root, d)


def test_diving48(tmp_path):
    root, d = tmp_path / "rgb", tmp_path / "annotations"
    write(
        d / "Diving48_vocab.json",
        json.dumps(
            [
                "Back 15som 05Twis FREE".split(),
                "Back 15som 15Twis FREE".split(),
                "Back 15som 25Twis FREE".split(),
            ]
        ),
        crlf=False,
    )
    write(
        d / "Diving48_V2_train.json",
        json.dumps(
            [
                {"vid_name": "-mmq0PT-u8k_00155", "label": 2, "start_frame": 0, "end_frame": 184},
                {"vid_name": "_8Vy3dlHg2w_00000", "label": 0, "start_frame": 0, "end_frame": 95},
            ],
            indent=1,
        ),
    )
    write(
        d / "Diving48_V2_test.json",
        json.dumps([{"vid_name": "_8Vy3dlHg2w_00001", "label": 1, "start_frame": 0, "end_frame": 70}]),
    )
    touch(root, "-mmq0PT-u8k_00155.mp4", "_8Vy3dlHg2w_00000.mp4", "_8Vy3dlHg2w_00001.mp4")
    s = read_split("diving48", root, d)
    assert s.classes == ["Back 15som 05Twis FREE", "Back 15som 15Twis FREE", "Back 15som 25Twis FREE"]
    assert [(p.name, y) for p, y in s.train] == [("-mmq0PT-u8k_00155.mp4", 2), ("_8Vy3dlHg2w_00000.mp4", 0)]
    assert [(p.name, y) for p, y in s.test] == [("_8Vy3dlHg2w_00001.mp4", 1)]
    write(d / "Diving48_V2_test.json", json.dumps([{"vid_name": "a", "label": 3}]))
    refused(r"Diving48_V2_test.json, entry 0: .*'label' in \[0, 3\)", "diving48", root, d)
    (d / "Diving48_V2_test.json").write_text("[{")
    refused(r"Diving48_V2_test.json: invalid JSON at line 1", "diving48", root, d)


def test_kinetics400(tmp_path):
    root, d = tmp_path / "k400", tmp_path / "kinetics400"
    touch(
        root,
        "abseiling/--GkrdYZ9Tc_000000_000010.mp4",
        "passing_American_football_(in_game)/-0AqOHCWBaQ_000007_000017.mp4",
        "--3ouPhoy2A_000020_000030.mp4",
        "zumba/-2x_DS_KcUg_000001_000011.mp4",
    )
    write(
        d / "train.csv",
        "label,youtube_id,time_start,time_end,split\nabseiling,--GkrdYZ9Tc,0,10,train\n"
        '"passing American football (in game)",-0AqOHCWBaQ,7,17,train\n\nzumba,--3ouPhoy2A,20,30,train\n'
        "abseiling,-3B32lodo2M,59,69,train\n",
    )
    write(d / "validate.csv", "label,youtube_id,time_start,time_end,split\nzumba,-2x_DS_KcUg,1,11,val \n")
    s = read_split("kinetics400", root, d)
    assert s.classes == ["abseiling", "passing American football (in game)", "zumba"]
    assert relative(root, s.train) == [
        ("abseiling/--GkrdYZ9Tc_000000_000010.mp4", 0),
        ("passing_American_football_(in_game)/-0AqOHCWBaQ_000007_000017.mp4", 1),
        ("--3ouPhoy2A_000020_000030.mp4", 2),
    ]
    assert [(p.name, y) for p, y in s.test] == [("-2x_DS_KcUg_000001_000011.mp4", 2)]
    assert s.missing == [("train", root / "-3B32lodo2M_000059_000069.mp4")] and "1 listed but not found" in s.headline()
    write(
        d / "validate.csv",
        "label,youtube_id,time_start,time_end,split\nzumba,-2x_DS_KcUg,1,11,val\ncooking egg,x,a,b,val\n",
    )
    refused(r"validate.csv, line 3: 'cooking egg,x,a,b,val': expected .*integer times", "kinetics400", root, d)
    write(
        d / "validate.csv", "label,youtube_id,time_start,time_end,split\r\n\r\ncooking egg,x,1,11,val\r\n", crlf=False
    )
    refused(
        r"validate.csv, line 3: .*expected a class of train.csv \('cooking egg' is not one\)", "kinetics400", root, d
    )
    write(d / "validate.csv", "youtube_id,label\nx,zumba\n")
    refused(r"validate.csv, line 1: .*expected the header label,youtube_id", "kinetics400", root, d)
    (d / "train.csv").unlink()
    refused(r"train.csv: no such file", "kinetics400", root, d)


def test_folder(tmp_path):
    root = tmp_path / "ds"
    touch(root, "train/run/a.mp4", "train/run/b.mp4", "train/jump/c.avi", "train/jump/notes.txt", "test/jump/d.mp4")
    (root / "train/sit").mkdir()
    s = read_split("folder", root)
    assert s.classes == ["jump", "run", "sit"]
    assert relative(root, s.train) == [("train/jump/c.avi", 0), ("train/run/a.mp4", 1), ("train/run/b.mp4", 1)]
    assert [(p.name, y) for p, y in s.test] == [("d.mp4", 0)]
    only = read_split("folder", root / "train", None)  # class folders without train/ and test/: all train
    assert only.classes == s.classes and len(only.train) == 3 and only.test == []
    touch(root, "test/fly/e.mp4")
    refused(r"class folder\(s\) fly not among the train classes", "folder", root)


def test_bad_arguments(tmp_path):
    refused(
        r"dataset: 'ucf' is not one of ucf101, hmdb51, ssv2, diving48, kinetics400, folder", "ucf", tmp_path, tmp_path
    )
    refused(r"no such folder, expected the ucf101 video root", "ucf101", tmp_path / "x", tmp_path)
    refused(r"nope: no such folder, expected the folder of hmdb51's split files", "hmdb51", tmp_path, tmp_path / "nope")
    refused(r"the folder of ssv2's split files is needed", "ssv2", tmp_path)
    write(tmp_path / "classInd.txt", "")
    refused(r"classInd.txt: empty", "ucf101", tmp_path, tmp_path)
    (tmp_path / "classInd.txt").write_bytes(b"\xff\xfe1 A")
    refused(r"classInd.txt: not UTF-8 text", "ucf101", tmp_path, tmp_path)
    assert SPLIT_DATASETS == ("ucf101", "hmdb51", "ssv2", "diving48", "kinetics400", "folder")


HMDB51_CLASSES = (
    "brush_hair cartwheel catch chew clap climb climb_stairs dive draw_sword dribble drink eat fall_floor fencing "
    "flic_flac golf handstand hit hug jump kick kick_ball kiss laugh pick pour pullup punch push pushup ride_bike "
    "ride_horse run shake_hands shoot_ball shoot_bow shoot_gun sit situp smile smoke somersault stand swing_baseball "
    "sword sword_exercise talk throw turn walk wave"
).split()  # HMDB51's 51 action classes, as its split archive names them (testTrainMulti_7030_splits)


def test_hmdb51_classes_are_sorted_by_name_not_by_split_file_name(tmp_path):
    "Issue 23: the 51 split files as HMDB51 ships them; class i is the i-th class name in sorted order."
    root, d = tmp_path / "hmdb51", tmp_path / "testTrainMulti_7030_splits"
    for i, c in enumerate(HMDB51_CLASSES):
        write(d / f"{c}_test_split1.txt", f"{c}_train_{i}.avi 1 \n{c}_test_{i}.avi 2 \n{c}_unused_{i}.avi 0 \n")
        touch(root / c, f"{c}_train_{i}.avi", f"{c}_test_{i}.avi")
    s = read_split("hmdb51", root, d, 1)
    assert len(HMDB51_CLASSES) == 51 and s.classes == sorted(HMDB51_CLASSES)
    for part in (s.train, s.test):
        assert len(part) == 51
        assert all(s.classes[y] == p.parent.name for p, y in part)  # each video's label is its own class
    by_files = [f.name[: -len("_test_split1.txt")] for f in sorted(d.iterdir())]
    moved = [c for i, c in enumerate(by_files) if s.classes[i] != c]
    assert sorted(moved) == ["climb", "climb_stairs", "kick", "kick_ball", "sword", "sword_exercise"]


# UCF101's classInd.txt as the dataset ships it (1-based indices, CRLF lines): the case-insensitive order of the names
UCF101_CLASSES = """ApplyEyeMakeup ApplyLipstick Archery BabyCrawling BalanceBeam BandMarching BaseballPitch Basketball
BasketballDunk BenchPress Biking Billiards BlowDryHair BlowingCandles BodyWeightSquats Bowling BoxingPunchingBag
BoxingSpeedBag BreastStroke BrushingTeeth CleanAndJerk CliffDiving CricketBowling CricketShot CuttingInKitchen Diving
Drumming Fencing FieldHockeyPenalty FloorGymnastics FrisbeeCatch FrontCrawl GolfSwing Haircut Hammering HammerThrow
HandstandPushups HandstandWalking HeadMassage HighJump HorseRace HorseRiding HulaHoop IceDancing JavelinThrow
JugglingBalls JumpingJack JumpRope Kayaking Knitting LongJump Lunges MilitaryParade Mixing MoppingFloor Nunchucks
ParallelBars PizzaTossing PlayingCello PlayingDaf PlayingDhol PlayingFlute PlayingGuitar PlayingPiano PlayingSitar
PlayingTabla PlayingViolin PoleVault PommelHorse PullUps Punch PushUps Rafting RockClimbingIndoor RopeClimbing Rowing
SalsaSpin ShavingBeard Shotput SkateBoarding Skiing Skijet SkyDiving SoccerJuggling SoccerPenalty StillRings
SumoWrestling Surfing Swing TableTennisShot TaiChi TennisSwing ThrowDiscus TrampolineJumping Typing UnevenBars
VolleyballSpiking WalkingWithDog WallPushups WritingOnBoard YoYo""".split()


def test_ucf101_class_indices_are_classind_order(tmp_path):
    """A split written exactly as UCF101 ships it, one video per class: every label is the class's classInd.txt index
    minus 1, which is the sort by class name ignoring case; a case-sensitive sort would swap Hammering / HammerThrow
    and JumpingJack / JumpRope."""
    root, d = tmp_path / "UCF-101", tmp_path / "ucfTrainTestlist"
    d.mkdir()
    (d / "classInd.txt").write_bytes("".join(f"{i} {c}\r\n" for i, c in enumerate(UCF101_CLASSES, 1)).encode())
    train = [f"{c}/v_{c}_g08_c01.avi" for c in UCF101_CLASSES]
    test = [f"{c}/v_{c}_g01_c01.avi" for c in UCF101_CLASSES]
    (d / "trainlist01.txt").write_bytes("".join(f"{v} {i}\r\n" for i, v in enumerate(train, 1)).encode())
    (d / "testlist01.txt").write_bytes("".join(f"{v}\r\n" for v in test).encode())
    for v in train + test:
        (root / v).parent.mkdir(parents=True, exist_ok=True)
        (root / v).write_bytes(b"")  # listed files only; nothing is decoded
    s = read_split("ucf101", root, d, 1)
    assert len(UCF101_CLASSES) == 101 and s.classes == UCF101_CLASSES
    assert s.classes == sorted(UCF101_CLASSES, key=str.lower)
    for part in (s.train, s.test):
        assert [(p.parent.name, y) for p, y in part] == [(c, i) for i, c in enumerate(UCF101_CLASSES)]
    swapped = [c for c, k in zip(UCF101_CLASSES, sorted(UCF101_CLASSES)) if c != k]
    assert swapped == ["Hammering", "HammerThrow", "JumpingJack", "JumpRope"]


def test_ucf101_classes_that_differ_only_in_case(tmp_path):
    """Issue 35: classInd.txt may hold two classes spelled alike but for the case (`YoYo` and `yoyo`). A line names its
    class as spelled; the case-blind match, which the official lists need (HandStandPushups), is only a fallback for a
    name that is no class as spelled, and a name that matches both in any case is refused."""
    root, d = tmp_path / "UCF-101", tmp_path / "ucfTrainTestlist"
    write(d / "classInd.txt", "1 YoYo\n2 yoyo\n")
    videos = [
        "YoYo/v_YoYo_g08_c01.avi",
        "yoyo/v_yoyo_g08_c01.avi",
        "YoYo/v_YoYo_g01_c01.avi",
        "yoyo/v_yoyo_g01_c01.avi",
    ]
    write(d / "trainlist01.txt", f"{videos[0]} 1\n{videos[1]} 2\n")
    write(d / "testlist01.txt", f"{videos[3]}\n{videos[2]}\n")
    touch(root, *videos)
    s = read_split("ucf101", root, d, split=1)
    assert s.classes == ["YoYo", "yoyo"]
    assert relative(root, s.train) == [(videos[0], 0), (videos[1], 1)]
    assert relative(root, s.test) == [(videos[3], 1), (videos[2], 0)]
    write(d / "testlist01.txt", "YOYO/v_YoYo_g01_c01.avi\n")
    refused(r"testlist01\.txt.*line 1.*with CLASS in classInd\.txt", "ucf101", root, d, 1)


def test_one_video_one_place(ucf, tmp_path):
    """Issue 35: a video listed twice was stored once but counted twice; one in both UCF101's trainlist and testlist was
    stored in both stores (a train/test leak); HMDB51 stored a video listed as train in two classes under the last,
    and one listed as train in one class and test in another in both stores, with different labels."""
    root, d = ucf
    train = (d / "trainlist01.txt").read_text()
    write(d / "trainlist01.txt", train + "YoYo/v_YoYo_g08_c01.avi 3\n")  # a duplicate line
    with pytest.warns(UserWarning, match=r"ucf101: 1 video\(s\) listed more than once, each stored once"):
        s = read_split("ucf101", root, d, 1)
    assert len(s.train) == 3 and s.headline().startswith("ucf101 split 1: 3 train and 3 test videos")
    write(d / "trainlist01.txt", train + "YoYo/v_YoYo_g01_c01.avi 3\n")  # a test video listed for training too
    refused(
        r"v_YoYo_g01_c01.avi: listed for both train and test of ucf101 split 1 .*: the test set would leak",
        "ucf101",
        root,
        d,
        1,
    )

    hroot, hd = tmp_path / "hmdb51", tmp_path / "hmdb_splits"  # the videos flat in the root
    write(hd / "brush_hair_test_split1.txt", "a.avi 1\nb.avi 2\n")
    write(hd / "cartwheel_test_split1.txt", "a.avi 1\nc.avi 2\n")
    touch(hroot, "a.avi", "b.avi", "c.avi")
    with pytest.warns(UserWarning, match=r"a.avi as .*a.avi \(brush_hair\), .*a.avi \(cartwheel\)"):
        s = read_split("hmdb51", hroot, hd, 1)
    assert [(p.name, y) for p, y in s.train] == [("a.avi", 0)]  # once, in the class listed first
    write(hd / "cartwheel_test_split1.txt", "a.avi 2\nc.avi 1\n")
    refused(
        r"a.avi: listed for both train and test of hmdb51 split 1 \(train: .*\(brush_hair\); test: .*\(cartwheel\)\)",
        "hmdb51",
        hroot,
        hd,
        1,
    )
