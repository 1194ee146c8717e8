"""Metadata of every dataset clestim knows: description, citation, licence, tasks.

Kept in one table so that loaders, ``list_datasets`` and ``docs/datasets.md``
tell the same story.
"""

TSCIL_CITATION = (
    "Z. Qiao, Q. Pham, Z. Cao, H. H. Le, P. N. Suganthan, X. Jiang, R. Savitha, "
    '"Class-incremental Learning for Time Series: Benchmark and Evaluation", KDD 2024. '
    "Code: https://github.com/zqiao11/TSCIL"
)

INFO = {
    "uci_har": dict(
        kind="benchmark",
        summary="UCI-HAR smartphone activities, 9 raw inertial signals, 6 classes",
        shape="(7352, 9, 128) / (2947, 9, 128)",
        n_classes=6,
        n_tasks=3,
        prepared="uci_har_inertial.npz",
        sha256="9d5e6a1e032e2b769a1ec7b0d248369dc1404eef3c5341e366c83fe71e7588a4",
        url="https://archive.ics.uci.edu/static/public/240/"
        "human+activity+recognition+using+smartphones.zip",
        raw_files="'UCI HAR Dataset/{train,test}/Inertial Signals/*_{train,test}.txt', "
        "'y_{train,test}.txt' and 'subject_{train,test}.txt' (the unzipped UCI release)",
        citation='D. Anguita, A. Ghio, L. Oneto, X. Parra, J. L. Reyes-Ortiz, "A Public Domain '
        'Dataset for Human Activity Recognition Using Smartphones", ESANN 2013.',
        license="CC BY 4.0 as listed by the UCI repository; the original README asks for the "
        'citation above and states "Any commercial use is prohibited".',
    ),
    "dsa": dict(
        kind="benchmark",
        summary="UCI Daily and Sports Activities, 5 IMUs (45 channels), 18 classes "
        "(activity 16 dropped as in TSCIL)",
        shape="(6480, 45, 125) / (2160, 45, 125)",
        n_classes=18,
        n_tasks=9,
        prepared="dsa_18cls.npz",
        sha256="8256374ab774c6b6d6572e7bf8f6bf73d0f662815c1ae1ceee2249d61077c578",
        url="https://archive.ics.uci.edu/static/public/256/daily+and+sports+activities.zip",
        raw_files="'data/aXX/pY/sZZ.txt' (the unzipped UCI release: 19 activity folders a01..a19, "
        "8 subjects p1..p8, 60 segments s01..s60)",
        citation='K. Altun, B. Barshan, O. Tuncel, "Comparative study on classifying human '
        'activities with miniature inertial and magnetic sensors", Pattern Recognition '
        '43(10):3605-3620, 2010. B. Barshan, M. C. Yuksek, "Recognizing daily and sports '
        "activities in two open source machine learning environments using body-worn sensor "
        'units", The Computer Journal 57(11):1649-1667, 2014.',
        license="CC BY 4.0 (UCI repository).",
    ),
    "uwave": dict(
        kind="benchmark",
        summary="uWave gestures (UCR UWaveGestureLibraryAll), 3-axis accelerometer, 8 classes",
        shape="(896, 3, 315) / (3582, 3, 315)",
        n_classes=8,
        n_tasks=4,
        prepared="uwave.npz",
        sha256=None,
        url="https://www.timeseriesclassification.com/aeon-toolkit/UWaveGestureLibraryAll.zip",
        raw_files="'UWaveGestureLibraryAll_TRAIN' and '_TEST' files in UCR text (.txt/.tsv), "
        "sktime .ts or .arff format",
        citation='J. Liu, L. Zhong, J. Wickramasuriya, V. Vasudevan, "uWave: Accelerometer-based '
        'personalized gesture recognition and its applications", Pervasive and Mobile '
        "Computing 5(6):657-675, 2009. H. A. Dau et al., \"The UCR Time Series Archive\", "
        "IEEE/CAA Journal of Automatica Sinica 6(6):1293-1305, 2019.",
        license="Distributed by the UCR/UEA archive for research use; the archive asks users "
        "to cite it. No explicit open licence is stated.",
    ),
    "wisdm": dict(
        kind="benchmark",
        summary="WISDM 2019 smartphone accelerometer, 51 subjects, 18 activities, "
        "windows of 200 (10 s at 20 Hz)",
        shape="about 12.4k / 4.1k windows of (3, 200)",
        n_classes=18,
        n_tasks=9,
        prepared="wisdm.npz",
        sha256=None,
        url="https://archive.ics.uci.edu/static/public/507/"
        "wisdm+smartphone+and+smartwatch+activity+and+biometrics+dataset.zip",
        raw_files="'wisdm-dataset/raw/phone/accel/data_16SS_accel_phone.txt' for the 51 "
        "subjects 1600..1650",
        citation='G. M. Weiss, K. Yoneda, T. Hayajneh, "Smartphone and Smartwatch-Based '
        'Biometrics Using Activities of Daily Living", IEEE Access 7:133190-133202, 2019.',
        license="CC BY 4.0 (UCI repository, id 507).",
    ),
    "grabmyo": dict(
        kind="benchmark",
        summary="GRABMyo forearm+wrist sEMG (28 channels), session 1, 43 subjects, "
        "16 gestures, 256 Hz windows of 128",
        shape="(36120, 28, 128) / (12040, 28, 128)",
        n_classes=16,
        n_tasks=8,
        prepared="grabmyo.npz",
        sha256=None,
        url=None,
        raw_files="'session1_participant{1..43}.mat' (MATLAB conversion of the PhysioNet "
        "release, with 7x17 cell arrays DATA_FOREARM and DATA_WRIST); the PhysioNet "
        "release itself (https://physionet.org/content/grabmyo/) is WFDB and must be "
        "converted first",
        citation='A. Pradhan, J. He, N. Jiang, "Multi-day dataset of forearm and wrist '
        'electromyogram for hand gesture recognition and biometrics", Scientific Data 9:733, '
        "2022. PhysioNet, https://doi.org/10.13026/dzhr-nj10.",
        license="Open Data Commons Attribution License v1.0, as listed by PhysioNet.",
    ),
    "mnist": dict(
        kind="image",
        summary="MNIST handwritten digits, 28x28, 10 classes (basic-scenario experiments)",
        shape="(60000, 784) / (10000, 784), or (n, 1, 28, 28)",
        n_classes=10,
        n_tasks=5,
        prepared="mnist.npz",
        sha256="45018a0e11658ecd0e37fb8fc5e3eb15aea36b14ccb389499d12dd20c8648555",
        url="https://ossci-datasets.s3.amazonaws.com/mnist/",
        raw_files="'train-images-idx3-ubyte', 'train-labels-idx1-ubyte', "
        "'t10k-images-idx3-ubyte', 't10k-labels-idx1-ubyte' (optionally .gz)",
        citation='Y. LeCun, C. Cortes, C. J. C. Burges, "The MNIST database of handwritten '
        'digits", http://yann.lecun.com/exdb/mnist/. Y. LeCun, L. Bottou, Y. Bengio, '
        'P. Haffner, "Gradient-based learning applied to document recognition", Proc. IEEE '
        "86(11):2278-2324, 1998.",
        license="Usually given as CC BY-SA 3.0.",
    ),
    "basic_motions": dict(
        kind="embedded",
        summary="UEA BasicMotions (shipped with sktime), smartwatch acc+gyro, 4 classes",
        shape="(40, 6, 100) / (40, 6, 100)",
        n_classes=4,
        n_tasks=2,
        citation='A. Bagnall et al., "The UEA multivariate time series classification archive, '
        '2018", arXiv:1811.00075.',
        license="Ships inside sktime (BSD-3-Clause); the UEA archive asks users to cite it and "
        "states no separate data licence.",
    ),
    "japanese_vowels": dict(
        kind="embedded",
        summary="JapaneseVowels (shipped with sktime), 12 LPC cepstra, 9 speakers, "
        "unequal length 7..29 padded/truncated",
        shape="(270, 12, 29) / (370, 12, 29)",
        n_classes=9,
        n_tasks=3,
        citation='M. Kudo, J. Toyama, M. Shimbo, "Multidimensional curve classification using '
        'passing-through regions", Pattern Recognition Letters 20(11-13):1103-1111, 1999.',
        license="CC BY 4.0 (UCI repository); ships inside sktime (BSD-3-Clause).",
    ),
    "acsf1": dict(
        kind="embedded",
        summary="UCR ACSF1 (shipped with sktime), appliance power signatures, 10 classes",
        shape="(100, 1, 1460) / (100, 1, 1460)",
        n_classes=10,
        n_tasks=5,
        citation='C. Gisler, A. Ridi, D. Zufferey, O. A. Khaled, J. Hennebert, "Appliance '
        'consumption signature database and recognition test protocols", WoSSPA 2013.',
        license="UCR archive, research use with citation; ships inside sktime (BSD-3-Clause).",
    ),
    "osuleaf": dict(
        kind="embedded",
        summary="UCR OSULeaf (shipped with sktime), leaf outlines as series, 6 classes",
        shape="(200, 1, 427) / (242, 1, 427)",
        n_classes=6,
        n_tasks=3,
        citation='A. Gandhi, "Content-based image retrieval: plant species identification", '
        "MSc thesis, Oregon State University, 2002. H. A. Dau et al., \"The UCR Time Series "
        'Archive", 2019.',
        license="UCR archive, research use with citation; ships inside sktime (BSD-3-Clause).",
    ),
    "digits": dict(
        kind="embedded",
        summary="scikit-learn digits, 8x8 images, 10 classes, stratified 75/25 split",
        shape="(1347, 64) / (450, 64), or (n, 1, 8, 8)",
        n_classes=10,
        n_tasks=5,
        citation='E. Alpaydin, C. Kaynak, "Optical Recognition of Handwritten Digits", UCI '
        "Machine Learning Repository, 1998.",
        license="CC BY 4.0 (UCI repository); ships inside scikit-learn (BSD-3-Clause).",
    ),
}

ALIASES = {
    "har": "uci_har",
    "uci-har": "uci_har",
    "dailysports": "dsa",
    "daily_sports": "dsa",
    "uwavegesturelibraryall": "uwave",
    "basicmotions": "basic_motions",
    "japanesevowels": "japanese_vowels",
}
